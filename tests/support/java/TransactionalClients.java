import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka 4.x's Java transactional producer and read-committed consumer, several steps in one JVM (a
 * JVM start is the costly part). Run from source with kafka-clients on the class path:
 * {@code java -cp '.cache/peers/kafka4/*' TransactionalClients.java BOOTSTRAP STEP...}.
 *
 * <p>A step is one argument, its fields separated by {@code :}:
 * <ul>
 *   <li>{@code produce:TXN_ID:TOPIC:PLAN}: PLAN is a comma-separated list of transactions, each
 *       {@code c} (commit) or {@code a} (abort) and a record count ({@code c3,a2,c1}); the values
 *       are {@code java-<transaction>-<record>}, all to partition 0. Prints {@code PRODUCED <step>}.
 *   <li>{@code consume:TOPIC:ISOLATION:EXPECT}: reads partition 0 from its beginning until it has at
 *       least EXPECT records and its position has reached the partition's end for that isolation
 *       level (the last stable offset when reading committed). Prints {@code RECORD <step> <offset>
 *       <value>} for each record, then {@code CONSUMED <step>}.
 * </ul>
 * A step that fails prints {@code ERROR <step> <exception>: <message>} and the next one runs (a
 * consume of a topic whose produce step failed fails at once). Every
 * call is bounded (the clients' timeouts, 30 s a step), so the program never hangs on a broker that
 * refuses or ignores what it asks.
 */
public final class TransactionalClients {
    private static final long STEP_MS = 30_000;

    public static void main(String[] args) {
        String bootstrap = args[0];
        Set<String> unwritten = new HashSet<>();
        for (int step = 1; step < args.length; step++) {
            String[] fields = args[step].split(":");
            try {
                if (fields[0].equals("produce")) {
                    unwritten.add(fields[2]);
                    produce(bootstrap, fields[1], fields[2], fields[3]);
                    unwritten.remove(fields[2]);
                    System.out.println("PRODUCED " + step);
                } else if (fields[0].equals("consume") && unwritten.contains(fields[1])) {
                    // waiting for records that never came would only spend the step's time
                    throw new IllegalStateException("not read: its producer failed");
                } else if (fields[0].equals("consume")) {
                    consume(bootstrap, step, fields[1], fields[2], Integer.parseInt(fields[3]));
                    System.out.println("CONSUMED " + step);
                } else {
                    throw new IllegalArgumentException("unknown step " + args[step]);
                }
            } catch (Exception e) {
                String message = String.valueOf(e.getMessage()).replace('\n', ' ');
                System.out.println("ERROR " + step + " " + e.getClass().getName() + ": " + message);
            }
            System.out.flush();
        }
    }

    private static void produce(String bootstrap, String transactionalId, String topic, String plan) {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15_000);  // initTransactions, commit, abort
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20_000);
        config.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            String[] transactions = plan.split(",");
            for (int t = 0; t < transactions.length; t++) {
                int count = Integer.parseInt(transactions[t].substring(1));
                producer.beginTransaction();
                for (int i = 0; i < count; i++) {
                    byte[] value = ("java-" + t + "-" + i).getBytes();
                    producer.send(new ProducerRecord<>(topic, 0, null, value));
                }
                producer.flush();
                if (transactions[t].charAt(0) == 'c') {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
        }
    }

    private static void consume(String bootstrap, int step, String topic, String isolation, int expect) {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        config.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15_000);
        config.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            List<String> lines = new ArrayList<>();
            long deadline = System.currentTimeMillis() + STEP_MS;
            while (true) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    lines.add("RECORD " + step + " " + record.offset() + " " + new String(record.value()));
                }
                // the end for this isolation level: the last stable offset when reading committed
                Map<TopicPartition, Long> end = consumer.endOffsets(List.of(partition));
                if (lines.size() >= expect && consumer.position(partition) >= end.get(partition)) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    lines.forEach(System.out::println);
                    throw new IllegalStateException("read " + lines.size() + " of " + expect + " records of "
                        + topic + " in " + STEP_MS + " ms (position " + consumer.position(partition)
                        + ", end " + end.get(partition) + ")");
                }
            }
            lines.forEach(System.out::println);
        }
    }
}
