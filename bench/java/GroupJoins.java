// Members of one consumer group (Kafka's Java consumer, classic protocol, range assignor) join one
// at a time; after each join, the time from the new member's subscribe() until every member was
// handed its share of the new generation is printed as "JOIN <members> <milliseconds>".
// Arguments: bootstrap topic group members partitions. Used by bench/rebalance_bench.py.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupJoins {
    static final class Member implements Runnable, ConsumerRebalanceListener {
        final KafkaConsumer<byte[], byte[]> consumer;
        final String topic;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile long assignedAt = 0;
        volatile Set<Integer> assigned = new HashSet<>();

        Member(Properties settings, String topic) {
            this.consumer = new KafkaConsumer<>(settings, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            this.topic = topic;
        }

        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            Set<Integer> numbers = new HashSet<>();
            for (TopicPartition tp : partitions) numbers.add(tp.partition());
            assigned = numbers;
            assignedAt = System.nanoTime();
        }

        public void run() {
            consumer.subscribe(List.of(topic), this);
            while (!stop.get()) consumer.poll(Duration.ofMillis(50));
            consumer.close(Duration.ofSeconds(5));
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int members = Integer.parseInt(args[3]), partitions = Integer.parseInt(args[4]);
        Properties settings = new Properties();
        settings.put("bootstrap.servers", bootstrap);
        settings.put("group.id", group);
        settings.put("group.protocol", "classic");
        settings.put("session.timeout.ms", "6000");
        settings.put("heartbeat.interval.ms", "500");
        settings.put("auto.offset.reset", "earliest");
        settings.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor");
        List<Member> joined = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        try {
            for (int k = 1; k <= members; k++) {
                long start = System.nanoTime();
                Member member = new Member(settings, topic);
                joined.add(member);
                Thread thread = new Thread(member);
                threads.add(thread);
                thread.start();
                long deadline = start + 120_000_000_000L;
                while (!settled(joined, start, partitions)) {
                    if (System.nanoTime() > deadline) throw new IllegalStateException("no settled group of " + k);
                    Thread.sleep(2);
                }
                long last = 0;
                for (Member m : joined) last = Math.max(last, m.assignedAt);
                System.out.printf("JOIN %d %.1f%n", k, (last - start) / 1e6);
                System.out.flush();
            }
        } finally {
            for (Member m : joined) m.stop.set(true);
            for (Thread t : threads) t.join(10_000);
        }
    }

    static boolean settled(List<Member> members, long since, int partitions) {
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            if (m.assignedAt < since) return false;
            total += m.assigned.size();
            union.addAll(m.assigned);
        }
        return total == partitions && union.size() == partitions;
    }
}
