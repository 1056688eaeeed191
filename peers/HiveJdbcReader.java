import java.io.InputStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * A Hive JDBC client that reads tables by name, one new connection per reading, until its standard
 * input closes: the reader an analyst's BI tool is. Run from source with the Hive JDBC driver on the
 * class path (pyspark ships it): {@code java -cp 'pyspark/jars/*' HiveJdbcReader.java URL TABLE=QUERY...}.
 *
 * <p>Each reading runs every QUERY (one number each) on a fresh connection and prints one JSON line,
 * {@code {"TABLE": n, ...}}; a reading that fails prints {@code {"error": "..."}} instead, and the
 * reader goes on. It prints {@code ready} once, after its first reading.
 */
public final class HiveJdbcReader {
    private static volatile boolean stopped;

    public static void main(String[] args) throws Exception {
        String url = args[0];
        Thread watcher = new Thread(() -> {
            try (InputStream in = System.in) {
                while (in.read() != -1) { }
            } catch (Exception ignored) {
                // a closed or broken stdin means the same: stop
            }
            stopped = true;
        });
        watcher.setDaemon(true);
        watcher.start();
        boolean first = true;
        while (!stopped) {
            System.out.println(reading(url, args));
            if (first) {
                System.out.println("ready");
                first = false;
            }
            System.out.flush();
            Thread.sleep(300);
        }
    }

    private static String reading(String url, String[] args) {
        StringBuilder line = new StringBuilder("{");
        try (Connection connection = DriverManager.getConnection(url, "reader", "");
             Statement statement = connection.createStatement()) {
            for (int i = 1; i < args.length; i++) {
                String[] named = args[i].split("=", 2);
                try (ResultSet result = statement.executeQuery(named[1])) {
                    result.next();
                    line.append(i > 1 ? ", " : "").append('"').append(named[0]).append("\": ").append(result.getLong(1));
                }
            }
        } catch (SQLException failed) {
            String why = String.valueOf(failed.getMessage()).replace("\\", "\\\\").replace("\"", "'").replace("\n", " ");
            return "{\"error\": \"" + why + "\"}";
        }
        return line.append('}').toString();
    }
}
