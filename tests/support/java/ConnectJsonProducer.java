import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.json.JsonConverter;

/**
 * Kafka Connect's JsonConverter with schemas (what a source connector's records become on a topic,
 * Debezium's default), as a producer for the loader's {@code connect_json} decoder tests.
 *
 * <p>{@code BOOTSTRAP TOPIC COUNT}: builds COUNT Connect Structs of {@link #SCHEMA} (every primitive,
 * Decimal, Date, Time, Timestamp, an optional field, a nested struct, an array, a map), record i
 * holding the values {@link #valueOf} gives it, and sends {@code JsonConverter.fromConnectData}'s
 * bytes to partition 0, keyed {@code c-i}; prints {@code SENT offset}.
 */
public class ConnectJsonProducer {
  static final Schema INNER =
      SchemaBuilder.struct().name("demo.Inner").field("a", Schema.STRING_SCHEMA).field("b", Schema.INT32_SCHEMA).build();

  static final Schema SCHEMA =
      SchemaBuilder.struct()
          .name("demo.Everything")
          .field("i8", Schema.INT8_SCHEMA)
          .field("i16", Schema.INT16_SCHEMA)
          .field("i32", Schema.INT32_SCHEMA)
          .field("i64", Schema.INT64_SCHEMA)
          .field("f32", Schema.FLOAT32_SCHEMA)
          .field("f64", Schema.FLOAT64_SCHEMA)
          .field("flag", Schema.BOOLEAN_SCHEMA)
          .field("name", Schema.STRING_SCHEMA)
          .field("blob", Schema.BYTES_SCHEMA)
          .field("amount", Decimal.schema(2))
          .field("day", Date.SCHEMA)
          .field("at_time", Time.SCHEMA)
          .field("at", Timestamp.SCHEMA)
          .field("maybe", Schema.OPTIONAL_STRING_SCHEMA)
          .field("inner", INNER)
          .field("list", SchemaBuilder.array(Schema.INT32_SCHEMA).build())
          .field("tags", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).optional().build())
          .build();

  /** Record i (the Python side of the test computes the same values). */
  static Struct valueOf(int i) {
    Map<String, Long> tags = new LinkedHashMap<>();
    tags.put("k" + i, (long) i);
    tags.put("all", 1L);
    return new Struct(SCHEMA)
        .put("i8", (byte) (i % 100 - 50))
        .put("i16", (short) (i * 300 - 20000))
        .put("i32", i * 100_000)
        .put("i64", i * 10_000_000_000L)
        .put("f32", i + 0.5f)
        .put("f64", i / 8.0)
        .put("flag", i % 2 == 0)
        .put("name", "n\u00e9v-" + i)
        .put("blob", new byte[] {(byte) i, 0, (byte) 255})
        .put("amount", new BigDecimal(BigInteger.valueOf(i * 1001L - 5000), 2))
        .put("day", new java.util.Date(86_400_000L * (20_000 + i)))
        .put("at_time", new java.util.Date((i * 1_234_567L) % 86_400_000L))
        .put("at", new java.util.Date(1_764_300_000_000L + i * 1000L))
        .put("maybe", i % 2 == 0 ? null : "m" + i)
        .put("inner", new Struct(INNER).put("a", "in-" + i).put("b", i))
        .put("list", List.of(i, i + 1, i + 2))
        .put("tags", i % 5 == 4 ? null : tags);
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1];
    int count = Integer.parseInt(args[2]);
    JsonConverter converter = new JsonConverter();
    converter.configure(Map.of("schemas.enable", "true", "converter.type", "value"));
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("acks", "all");
    config.put("max.block.ms", "30000");
    config.put("delivery.timeout.ms", "30000");
    config.put("request.timeout.ms", "20000");
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (int i = 0; i < count; i++) {
        byte[] value = converter.fromConnectData(topic, SCHEMA, valueOf(i));
        byte[] key = ("c-" + i).getBytes("UTF-8");
        long offset = producer.send(new ProducerRecord<>(topic, 0, key, value)).get().offset();
        System.out.println("SENT " + offset);
      }
    }
  }
}
