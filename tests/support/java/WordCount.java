import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams' word count, the application the ecosystem tests run against a broker
 * (tests/support/streams.py starts it; run with Kafka 4.x's jars on the class path, as a source file).
 *
 * Arguments: bootstrap application-id state-dir processing-guarantee input-topic output-topic
 * (processing-guarantee: at_least_once or exactly_once_v2).
 *
 * Reads lines (any key) from the input topic, splits them into lower-case words, counts each word in
 * the state store "counts" (Streams creates its changelog, a compacted topic, and the repartition
 * topic the grouping by word needs; the changelog's segments roll every second and it is cleaned as
 * soon as 1% of it is dirty) and writes every new count to the output topic: key the word,
 * value the count as decimal text. The last value per key of the output is the word's count.
 *
 * Prints "STATE <new state>" on each state change (the tests wait for RUNNING) and "FAILED <cause>"
 * if a stream thread dies (the client then shuts down and the process exits 1). SIGTERM closes it.
 */
public class WordCount {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: WordCount bootstrap application-id state-dir guarantee input output");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[3]);
        // the counts show within a fraction of a second (and an exactly-once transaction is short)
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // replication.factor left at its default, -1: Streams' internal topics get the broker's own
        // a member killed without leaving is dropped from the group after 6 s (the broker's
        // minimum), not 45: the restarted application gets its tasks that much sooner
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        // the transaction a killed instance left open is aborted after 5 s (Streams' default: 10)
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 5000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[4], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            // the changelog rolls a segment a second and is cleaned as soon as 1% of it is dirty: a
            // restore reads a compacted log (offsets the cleaner removed), not only appends
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withLoggingEnabled(Map.of("segment.ms", "1000", "min.cleanable.dirty.ratio", "0.01")))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(args[5], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        int[] exit = {0};
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            System.out.println("FAILED " + exception);
            System.out.flush();
            exit[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(20));
        System.exit(exit[0]);
    }
}
