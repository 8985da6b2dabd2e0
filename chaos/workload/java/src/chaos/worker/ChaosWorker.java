package chaos.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;

/**
 * The harness's workload on the Java client (chaos.workload.java_client starts it).
 *
 * <p>Reads one JSON line on stdin: the role ({@code producer}: {@link Producing}, {@code member}: {@link
 * Member}, {@code probe}: {@link Probe}, {@code transform}: {@link Transform}), its spec and {@code config},
 * the Java client's properties. Writes each history event as one JSON line on stdout, in the rows of
 * chaos.run.events. SIGTERM ends the role gracefully (within its spec's {@code close_timeout_s}) and exits; the parent's death ends this process (setpriv --pdeathsig, and the
 * watchdog below for a parent that died before that was set).
 */
public final class ChaosWorker {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final PrintStream OUT =
      new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
  private static final CountDownLatch STOP = new CountDownLatch(1);
  private static final List<Runnable> ON_STOP = new CopyOnWriteArrayList<>();

  /** Topic, then partition: the order rows list partitions in. */
  static final Comparator<TopicPartition> BY_PARTITION =
      Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

  private ChaosWorker() {}

  public static void main(String[] args) throws Exception {
    watchParent();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line = in.readLine();
    if (line == null) {
      System.err.println("chaos worker: expected one JSON line (the spec) on stdin, got nothing");
      System.exit(2); // no shutdown hook yet
    }
    JsonNode spec = JSON.readTree(line);
    String role = spec.path("role").asText();
    CountDownLatch done = new CountDownLatch(1);
    long closeS = spec.path("close_timeout_s").asLong(30);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  STOP.countDown();
                  ON_STOP.forEach(Runnable::run);
                  try {
                    done.await(closeS + 5, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                }));
    int status = 0;
    try {
      switch (role) {
        case "producer" -> new Producing(spec).run();
        case "member" -> new Member(spec).run();
        case "probe" -> status = new Probe(spec).run();
        case "transform" -> new Transform(spec).run();
        default -> {
          System.err.println(
              "chaos worker: unknown role "
                  + role
                  + " (expected producer, member, probe or transform)");
          status = 2;
        }
      }
    } finally {
      OUT.flush();
      done.countDown();
    }
    if (status != 0) {
      System.exit(status);
    }
  }

  /** Whether SIGTERM asked the role to end. */
  static boolean stopping() {
    return STOP.getCount() == 0;
  }

  /** Wait up to {@code seconds} or until the stop; true when stopped. */
  static boolean awaitStop(double seconds) {
    try {
      return STOP.await((long) (seconds * 1000), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      return true;
    }
  }

  /** Run {@code action} when the stop comes (e.g. wake a blocked poll). */
  static void onStop(Runnable action) {
    ON_STOP.add(action);
  }

  /** Exit when the process that started this one is gone (its SIGKILL, a runner killed -9). */
  private static void watchParent() {
    String expected = System.getenv("CHAOS_PARENT_PID");
    if (expected == null) {
      return;
    }
    long parent = Long.parseLong(expected);
    Thread watchdog =
        new Thread(
            () -> {
              while (true) {
                long now = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
                if (now != parent) {
                  Runtime.getRuntime().halt(137);
                }
                try {
                  Thread.sleep(1000);
                } catch (InterruptedException e) {
                  return;
                }
              }
            },
            "chaos-parent-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
  }

  /** The spec's {@code config} as client properties. */
  static Properties properties(JsonNode spec) {
    return propertiesOf(spec.get("config"));
  }

  /** A JSON object of client settings as client properties. */
  static Properties propertiesOf(JsonNode settings) {
    Properties props = new Properties();
    Iterator<Map.Entry<String, JsonNode>> config = settings.fields();
    while (config.hasNext()) {
      Map.Entry<String, JsonNode> item = config.next();
      props.put(item.getKey(), item.getValue().asText());
    }
    return props;
  }

  static double mono() {
    return System.nanoTime() / 1e9; // CLOCK_MONOTONIC on Linux, as Python's time.monotonic()
  }

  static ObjectNode event(String kind, String runId, String process) {
    ObjectNode row = JSON.createObjectNode();
    row.put("run_id", runId);
    row.put("kind", kind);
    row.put("ts", System.currentTimeMillis() / 1000.0);
    row.put("mono", mono());
    row.put("process", process);
    return row;
  }

  static ObjectNode object() {
    return JSON.createObjectNode();
  }

  static synchronized void emit(ObjectNode row) {
    OUT.println(row.toString());
    OUT.flush();
  }

  /** The Kafka error code's name for a broker error, else the exception's class name. */
  static String errorName(Throwable e) {
    if (e instanceof ApiException) {
      Errors error = Errors.forException(e);
      if (error != Errors.UNKNOWN_SERVER_ERROR) {
        return error.name();
      }
    }
    return e.getClass().getSimpleName();
  }
}
