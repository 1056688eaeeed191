import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.avro.registry.confluent.shaded.io.confluent.kafka.schemaregistry.CompatibilityChecker;
import org.apache.flink.avro.registry.confluent.shaded.io.confluent.kafka.schemaregistry.CompatibilityLevel;
import org.apache.flink.avro.registry.confluent.shaded.io.confluent.kafka.schemaregistry.avro.AvroSchema;
import org.apache.flink.avro.shaded.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Confluent's own Avro compatibility verdicts (its CompatibilityChecker and AvroSchema, version
 * 7.5.3, as shaded into Flink's flink-sql-avro-confluent-registry on Maven Central), for the tests
 * that compare {@code kafkalog registry}'s refusals with them.
 *
 * <p>Reads pairs of lines from stdin: a new schema's text, then the previous one's (each on one
 * line), the previous one being version 1 of its subject. Answers each pair with one line of JSON:
 * {@code {"BACKWARD": [...], "FORWARD": [...], "FULL": [...]}}, each the messages a registry's
 * verbose compatibility check lists at that level (empty: compatible), or {@code {"error": "..."}}
 * when either schema does not parse. The checker's own messages are followed by what Confluent's
 * registry adds to a refusal: {@code {validateFields: 'false', compatibility: 'LEVEL'}}.
 */
public class AvroCompatibility {
  static final CompatibilityLevel[] LEVELS = {
    CompatibilityLevel.BACKWARD, CompatibilityLevel.FORWARD, CompatibilityLevel.FULL
  };

  public static void main(String[] args) throws Exception {
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    System.out.println("READY");
    System.out.flush();
    String newText;
    while ((newText = in.readLine()) != null) {
      String oldText = in.readLine();
      Map<String, Object> answer = new LinkedHashMap<>();
      try {
        AvroSchema now = new AvroSchema(newText);
        AvroSchema old = new AvroSchema(oldText, List.of(), Map.of(), 1);
        for (CompatibilityLevel level : LEVELS) {
          List<String> messages = new ArrayList<>(CompatibilityChecker.checker(level).isCompatible(now, List.of(old)));
          if (!messages.isEmpty()) {
            messages.add("{validateFields: 'false', compatibility: '" + level.name() + "'}");
          }
          answer.put(level.name(), messages);
        }
      } catch (Exception e) {
        answer.clear();
        answer.put("error", e.toString());
      }
      System.out.println(json.writeValueAsString(answer));
      System.out.flush();
    }
  }
}
