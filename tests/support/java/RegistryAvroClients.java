import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.flink.avro.shaded.org.apache.avro.Schema;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericData;
import org.apache.flink.avro.shaded.org.apache.avro.generic.GenericRecord;
import org.apache.flink.formats.avro.registry.confluent.ConfluentRegistryAvroDeserializationSchema;
import org.apache.flink.formats.avro.registry.confluent.ConfluentRegistryAvroSerializationSchema;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A Java producer and reader of Avro values in Confluent's wire format, for the tests of
 * {@code kafkalog registry} with a Java client of the registry's API from Maven Central: Flink's
 * ConfluentRegistryAvroSerializationSchema and ConfluentRegistryAvroDeserializationSchema (Confluent's
 * own CachedSchemaRegistryClient inside), with Kafka's Java producer and consumer.
 *
 * <p>{@code produce REGISTRY BOOTSTRAP TOPIC SCHEMA_FILE FIRST COUNT}: registers the schema (subject
 * {@code TOPIC-value}) through the serializer and sends COUNT records to partition 0, record i
 * (from FIRST) having every field set by {@link #valueOf}; prints {@code SENT offset hex-value}.
 *
 * <p>{@code read REGISTRY BOOTSTRAP TOPIC SCHEMA_FILE COUNT}: reads COUNT values of partition 0 from
 * offset 0 and decodes them with the deserializer into the reader schema of SCHEMA_FILE (the writer's
 * schema fetched by the value's id); prints {@code READ offset record-as-json}.
 *
 * <p>Any failure ends the JVM with status 1 and the exception on stderr.
 */
public class RegistryAvroClients {
  public static void main(String[] args) throws Exception {
    String registry = args[1], bootstrap = args[2], topic = args[3];
    Schema schema = new Schema.Parser().parse(Files.readString(Path.of(args[4])));
    if (args[0].equals("produce")) {
      produce(registry, bootstrap, topic, schema, Integer.parseInt(args[5]), Integer.parseInt(args[6]));
    } else {
      read(registry, bootstrap, topic, schema, Integer.parseInt(args[5]));
    }
  }

  /** Record i: each field of the schema set from i (the Python side computes the same values). */
  static GenericRecord valueOf(Schema schema, int i) {
    GenericRecord record = new GenericData.Record(schema);
    for (Schema.Field field : schema.getFields()) {
      switch (field.name()) {
        case "id" -> record.put("id", "java-" + i);
        case "n" -> record.put("n", (long) i * 1_000_000_007L);
        case "score" -> record.put("score", i / 4.0);
        case "ok" -> record.put("ok", i % 2 == 0);
        case "note" -> record.put("note", i % 3 == 0 ? null : "note-" + i);
        default -> throw new IllegalArgumentException("no value for field " + field.name());
      }
    }
    return record;
  }

  static void produce(String registry, String bootstrap, String topic, Schema schema, int first, int count)
      throws Exception {
    ConfluentRegistryAvroSerializationSchema<GenericRecord> serializer =
        ConfluentRegistryAvroSerializationSchema.forGeneric(topic + "-value", schema, registry);
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("acks", "all");
    config.put("max.block.ms", "30000");
    config.put("delivery.timeout.ms", "30000");
    config.put("request.timeout.ms", "20000");
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (int i = first; i < first + count; i++) {
        byte[] value = serializer.serialize(valueOf(schema, i));
        long offset = producer.send(new ProducerRecord<>(topic, 0, null, value)).get().offset();
        System.out.println("SENT " + offset + " " + hex(value));
      }
    }
  }

  static void read(String registry, String bootstrap, String topic, Schema schema, int count) throws Exception {
    ConfluentRegistryAvroDeserializationSchema<GenericRecord> deserializer =
        ConfluentRegistryAvroDeserializationSchema.forGeneric(schema, registry);
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("enable.auto.commit", "false");
    TopicPartition partition = new TopicPartition(topic, 0);
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      consumer.assign(List.of(partition));
      consumer.seek(partition, 0);
      List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 30_000;
      while (read.size() < count && System.currentTimeMillis() < deadline) {
        consumer.poll(Duration.ofMillis(500)).forEach(read::add);
      }
      if (read.size() < count) {
        throw new IllegalStateException("read " + read.size() + " of " + count + " records of " + topic);
      }
      for (ConsumerRecord<byte[], byte[]> record : read.subList(0, count)) {
        System.out.println("READ " + record.offset() + " " + deserializer.deserialize(record.value()));
      }
    }
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      out.append(String.format("%02x", b));
    }
    return out.toString();
  }
}
