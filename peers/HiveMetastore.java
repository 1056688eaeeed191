/*
 * A Hive metastore (thrift) service on 127.0.0.1 only, for the tests: Hive 2.3's own
 * HiveMetaStore.main listens on every interface and has no setting for the address. The handler is
 * Hive's (the jars are pyspark's), configured by the hive-site.xml first on the class path.
 * Run in source-file mode: java -cp CONF:JARS HiveMetastore.java PORT.
 */
import java.net.InetSocketAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.RetryingHMSHandler;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public final class HiveMetastore {
  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: HiveMetastore PORT");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    HiveConf conf = new HiveConf(new Configuration(), HiveMetaStore.HMSHandler.class);
    // init() runs inside getProxy: the database is connected and its schema created before we listen,
    // so an open port means a ready metastore
    IHMSHandler handler =
        RetryingHMSHandler.getProxy(conf, new HiveMetaStore.HMSHandler("metastore", conf, false), false);
    TThreadPoolServer server = new TThreadPoolServer(
        new TThreadPoolServer.Args(new TServerSocket(new InetSocketAddress("127.0.0.1", port)))
            .processor(new TSetIpAddressProcessor<>(handler))
            .transportFactory(new TTransportFactory())
            .protocolFactory(new TBinaryProtocol.Factory())
            .minWorkerThreads(2)
            .maxWorkerThreads(64));
    System.out.println("metastore listening on 127.0.0.1:" + port);
    System.out.flush();
    server.serve();
  }
}
