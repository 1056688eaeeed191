import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.protocol.OpenFileEntry;
import org.apache.hadoop.hdfs.protocol.OpenFilesIterator.OpenFilesType;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptReport;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerReport;
import org.apache.hadoop.yarn.api.records.ContainerState;
import org.apache.hadoop.yarn.api.records.SignalContainerCommand;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * Hadoop's mini clusters as one process for tests and benchmarks: a MiniDFSCluster (NameNode with
 * WebHDFS, DataNodes) and optionally a MiniYARNCluster (ResourceManager, one NodeManager), all on
 * 127.0.0.1 under one base directory.
 *
 * <p>Usage: {@code java -cp '.cache/peers/hadoop/*:<classes>' MiniClusters --base DIR
 * [--datanodes N] [--yarn] [--nm-memory-mb MB]}
 *
 * <p>Protocol with the parent (tests/support/hadoop.py): once up it writes a Hadoop configuration
 * directory ({@code DIR/conf}: core-site.xml, hdfs-site.xml and, with --yarn, yarn-site.xml) and prints
 * one line {@code READY {json of addresses}}. Then it reads commands, one per line, from stdin and
 * answers each with {@code OK <command>} or {@code ERROR <command>: <cause>}:
 * {@code namenode stop}, {@code namenode start} (same ports, same data: the NameNode comes back with
 * its namespace), {@code namenode restart}, {@code datanode stop I}, {@code datanode start I};
 * and two questions, answered {@code OK <command> <json list>}: {@code openfiles PATH} (the files
 * under PATH that a writer holds open: leases the NameNode still keeps) and {@code containers APP}
 * (the running containers of YARN application APP but its ApplicationMaster's); and
 * {@code container kill ID}, which has YARN kill one (SIGKILL, as when a NodeManager enforces a limit).
 * End of stdin (the parent gone, whatever the way) or SIGTERM stops every cluster and exits, so a
 * crashed test run leaves no Hadoop process behind.
 */
public final class MiniClusters {
    private final File base;
    private final int dataNodes;
    private final boolean withYarn;
    private final int nodeManagerMemoryMb;
    private MiniDFSCluster dfs;
    private MiniYARNCluster yarn;
    private final Map<Integer, MiniDFSCluster.DataNodeProperties> stoppedDataNodes = new HashMap<>();

    private MiniClusters(File base, int dataNodes, boolean withYarn, int nodeManagerMemoryMb) {
        this.base = base;
        this.dataNodes = dataNodes;
        this.withYarn = withYarn;
        this.nodeManagerMemoryMb = nodeManagerMemoryMb;
    }

    public static void main(String[] args) throws Exception {
        File base = null;
        int dataNodes = 1;
        boolean withYarn = false;
        int memory = 4096;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--base": base = new File(args[++i]).getAbsoluteFile(); break;
                case "--datanodes": dataNodes = Integer.parseInt(args[++i]); break;
                case "--yarn": withYarn = true; break;
                case "--nm-memory-mb": memory = Integer.parseInt(args[++i]); break;
                default:
                    System.err.println("MiniClusters: unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        if (base == null) {
            System.err.println("MiniClusters: --base DIR is required");
            System.exit(2);
        }
        MiniClusters clusters = new MiniClusters(base, dataNodes, withYarn, memory);
        Runtime.getRuntime().addShutdownHook(new Thread(clusters::stopAll, "mini-clusters-shutdown"));
        clusters.start();
        clusters.serve();
        // End of stdin: stop here rather than in the shutdown hook (a hook cannot remove the hooks
        // that Hadoop's services remove while they stop).
        long began = System.nanoTime();
        clusters.stopAll();
        System.err.printf("MiniClusters: stopped in %.1f s%n", (System.nanoTime() - began) / 1e9);
        System.exit(0);
    }

    private Configuration baseConfiguration() {
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(base, "dfs").getPath());
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.setInt("dfs.replication", Math.min(dataNodes, 3));
        // Tests stop the NameNode on purpose: clients should fail in seconds, not retry for minutes.
        conf.setInt("ipc.client.connect.max.retries", 2);
        conf.setInt("ipc.client.connect.max.retries.on.timeouts", 2);
        conf.setBoolean("dfs.permissions.enabled", true);
        // Any local user (the tests' and the YARN containers') may act as itself over WebHDFS.
        conf.set("hadoop.proxyuser." + System.getProperty("user.name") + ".hosts", "*");
        conf.set("hadoop.proxyuser." + System.getProperty("user.name") + ".groups", "*");
        return conf;
    }

    private void start() throws Exception {
        Configuration conf = baseConfiguration();
        dfs = new MiniDFSCluster.Builder(conf)
                .numDataNodes(dataNodes)
                .format(true)
                .checkExitOnShutdown(false)
                .build();
        dfs.waitActive();
        if (withYarn) {
            YarnConfiguration yarnConf = new YarnConfiguration(dfs.getConfiguration(0));
            yarnConf.set("fs.defaultFS", dfs.getURI().toString());
            yarnConf.set(YarnConfiguration.RM_HOSTNAME, "127.0.0.1");
            yarnConf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, false);
            // The capacity scheduler's queues, which a capacity-scheduler.xml would otherwise hold.
            yarnConf.set("yarn.scheduler.capacity.root.queues", "default");
            yarnConf.set("yarn.scheduler.capacity.root.default.capacity", "100");
            yarnConf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
            yarnConf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
            yarnConf.setInt(YarnConfiguration.NM_PMEM_MB, nodeManagerMemoryMb);
            yarnConf.setInt(YarnConfiguration.NM_VCORES, 4);
            yarnConf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
            yarnConf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, nodeManagerMemoryMb);
            yarnConf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
            yarnConf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
            yarnConf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.5f);
            // The containers need JAVA_HOME (Spark's launch command is {{JAVA_HOME}}/bin/java).
            yarnConf.set(YarnConfiguration.NM_ENV_WHITELIST,
                    "JAVA_HOME,HADOOP_CONF_DIR,PATH,LANG,PYSPARK_PYTHON,SPARK_HOME");
            System.setProperty("hadoop.tmp.dir", new File(base, "tmp").getPath());
            yarn = new MiniYARNCluster("yarn", 1, 1, 1);
            yarn.init(yarnConf);
            yarn.start();
            if (!yarn.waitForNodeManagersToConnect(60_000)) {
                throw new IOException("the NodeManager did not register with the ResourceManager in 60 s");
            }
        }
        writeConfigurationDirectory();
        Map<String, String> ready = new LinkedHashMap<>();
        ready.put("hdfs", dfs.getURI().toString());
        ready.put("webhdfs", "http://" + dfs.getNameNode().getHttpAddress().getHostString() + ":"
                + dfs.getNameNode().getHttpAddress().getPort());
        ready.put("namenode_port", Integer.toString(dfs.getNameNodePort()));
        ready.put("conf_dir", new File(base, "conf").getPath());
        if (yarn != null) {
            ready.put("resourcemanager", yarn.getConfig().get(YarnConfiguration.RM_ADDRESS));
            ready.put("resourcemanager_web", yarn.getConfig().get(YarnConfiguration.RM_WEBAPP_ADDRESS));
        }
        System.out.println("READY " + json(ready));
        System.out.flush();
    }

    private void writeConfigurationDirectory() throws IOException {
        File dir = new File(base, "conf");
        if (!dir.isDirectory() && !dir.mkdirs()) {
            throw new IOException("cannot create " + dir);
        }
        Configuration core = new Configuration(false);
        core.set("fs.defaultFS", dfs.getURI().toString());
        core.setInt("ipc.client.connect.max.retries", 2);
        core.setInt("ipc.client.connect.max.retries.on.timeouts", 2);
        write(core, new File(dir, "core-site.xml"));
        Configuration hdfs = new Configuration(false);
        hdfs.setInt("dfs.replication", Math.min(dataNodes, 3));
        hdfs.set("dfs.namenode.http-address", "127.0.0.1:" + dfs.getNameNode().getHttpAddress().getPort());
        hdfs.setBoolean("dfs.webhdfs.enabled", true);
        write(hdfs, new File(dir, "hdfs-site.xml"));
        if (yarn != null) {
            // The ResourceManager's addresses (ephemeral ports) only: the rest of the effective
            // configuration names test-only classes (StaticMapping) that clients cannot load.
            Configuration site = new Configuration(false);
            for (Map.Entry<String, String> entry : yarn.getConfig()) {
                String key = entry.getKey();
                if (key.startsWith("yarn.resourcemanager.") && key.endsWith(".address")) {
                    site.set(key, yarn.getConfig().get(key));
                }
            }
            site.set(YarnConfiguration.RM_HOSTNAME, yarn.getConfig().get(YarnConfiguration.RM_HOSTNAME));
            write(site, new File(dir, "yarn-site.xml"));
        }
    }

    private static void write(Configuration conf, File file) throws IOException {
        File partial = new File(file.getPath() + ".partial");
        try (OutputStream out = new FileOutputStream(partial)) {
            conf.writeXml(out);
        }
        if (!partial.renameTo(file)) {
            throw new IOException("cannot rename " + partial + " to " + file);
        }
    }

    private void serve() throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String command = line.trim();
            if (command.isEmpty()) {
                continue;
            }
            try {
                String answer = run(command.split("\\s+"));
                System.out.println("OK " + command + (answer.isEmpty() ? "" : " " + answer));
            } catch (Exception e) {
                System.out.println("ERROR " + command + ": " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
    }

    /** Carries out one command; returns what it answers (a JSON list for questions, else ""). */
    private String run(String[] words) throws Exception {
        String target = words[0];
        String action = words.length > 1 ? words[1] : "";
        if (target.equals("openfiles") && words.length == 2) {
            return openFiles(words[1]);
        } else if (target.equals("containers") && words.length == 2) {
            return containers(ApplicationId.fromString(words[1]));
        } else if (target.equals("container") && action.equals("kill") && words.length == 3) {
            withYarnClient(client -> {
                client.signalToContainer(ContainerId.fromString(words[2]), SignalContainerCommand.FORCEFUL_SHUTDOWN);
                return "";
            });
        } else if (target.equals("namenode") && action.equals("stop")) {
            dfs.shutdownNameNode(0);
        } else if (target.equals("namenode") && action.equals("start")) {
            dfs.restartNameNode(0, true);
        } else if (target.equals("namenode") && action.equals("restart")) {
            dfs.restartNameNode(true);
        } else if (target.equals("namenode") && action.equals("safemode") && words.length == 3) {
            // what an operator's `hdfs dfsadmin -safemode enter|leave` does: the NameNode refuses changes
            HdfsConstants.SafeModeAction mode = switch (words[2]) {
                case "enter" -> HdfsConstants.SafeModeAction.SAFEMODE_ENTER;
                case "leave" -> HdfsConstants.SafeModeAction.SAFEMODE_LEAVE;
                default -> throw new IllegalArgumentException("namenode safemode enter|leave");
            };
            dfs.getNameNodeRpc().setSafeMode(mode, false);
        } else if (target.equals("datanode") && action.equals("stop") && words.length == 3) {
            int index = Integer.parseInt(words[2]);
            MiniDFSCluster.DataNodeProperties properties = dfs.stopDataNode(index);
            if (properties == null) {
                throw new IOException("no DataNode " + index);
            }
            stoppedDataNodes.put(index, properties);
        } else if (target.equals("datanode") && action.equals("start") && words.length == 3) {
            int index = Integer.parseInt(words[2]);
            MiniDFSCluster.DataNodeProperties properties = stoppedDataNodes.remove(index);
            if (properties == null) {
                throw new IOException("DataNode " + index + " was not stopped");
            }
            dfs.restartDataNode(properties, true);
            dfs.waitActive();
        } else {
            throw new IllegalArgumentException("unknown command (namenode stop|start|restart, namenode safemode enter|leave, datanode stop|start I, "
                    + "openfiles PATH, containers APP, container kill ID)");
        }
        return "";
    }

    private String openFiles(String path) throws IOException {
        DistributedFileSystem fs = dfs.getFileSystem();
        List<String> open = new ArrayList<>();
        RemoteIterator<OpenFileEntry> entries = fs.listOpenFiles(EnumSet.of(OpenFilesType.ALL_OPEN_FILES), path);
        while (entries.hasNext()) {
            open.add(entries.next().getFilePath());
        }
        return jsonList(open);
    }

    private String containers(ApplicationId app) throws Exception {
        return withYarnClient(client -> {
            List<String> running = new ArrayList<>();
            for (ApplicationAttemptReport attempt : client.getApplicationAttempts(app)) {
                for (ContainerReport container : client.getContainers(attempt.getApplicationAttemptId())) {
                    if (container.getContainerState() == ContainerState.RUNNING
                            && !container.getContainerId().equals(attempt.getAMContainerId())) {
                        running.add(container.getContainerId().toString());
                    }
                }
            }
            return jsonList(running);
        });
    }

    private interface YarnCall {
        String call(YarnClient client) throws Exception;
    }

    private String withYarnClient(YarnCall call) throws Exception {
        if (yarn == null) {
            throw new IllegalStateException("YARN is not running (start with --yarn)");
        }
        YarnClient client = YarnClient.createYarnClient();
        client.init(yarn.getConfig());
        client.start();
        try {
            return call.call(client);
        } finally {
            client.stop();
        }
    }

    private static String jsonList(List<String> values) {
        StringBuilder out = new StringBuilder("[");
        for (String value : values) {
            if (out.length() > 1) {
                out.append(", ");
            }
            out.append('"').append(value.replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
        }
        return out.append(']').toString();
    }

    private synchronized void stopAll() {
        List<Exception> failures = new ArrayList<>();
        if (yarn != null) {
            long began = System.nanoTime();
            try {
                yarn.stop();
                System.err.printf("MiniClusters: YARN stopped in %.1f s%n", (System.nanoTime() - began) / 1e9);
            } catch (Exception e) {
                failures.add(e);
            }
            yarn = null;
        }
        if (dfs != null) {
            try {
                dfs.shutdown(true);
            } catch (Exception e) {
                failures.add(e);
            }
            dfs = null;
        }
        for (Exception e : failures) {
            System.err.println("MiniClusters: while stopping: " + e);
        }
    }

    private static String json(Map<String, String> values) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, String> entry : values.entrySet()) {
            if (out.length() > 1) {
                out.append(", ");
            }
            out.append('"').append(entry.getKey()).append("\": \"")
                    .append(entry.getValue().replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
        }
        return out.append('}').toString();
    }
}
