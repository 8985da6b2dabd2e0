package chaos.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The harness's workload on the Java client (chaos.workload.java_client starts it).
 *
 * <p>Reads one JSON line on stdin: {"role": "producer", "run_id", "name", "topic", "rate", "count",
 * "duration_s", "keys", "flush_timeout_s", "config": {Java client properties}}. Writes each history event as
 * one JSON line on stdout, in the rows of chaos.run.events (send_invoke, send_outcome, client_log). A failed
 * send's outcome is left null with its error name: the parent classifies it with the librdkafka worker's
 * rules (chaos.workload.outcomes), so both clients' outcomes mean the same. SIGTERM ends the sending, flushes
 * within flush_timeout_s and exits; the parent's death ends this process (setpriv --pdeathsig, and the
 * watchdog below for a parent that died before that was set).
 */
public final class ChaosWorker {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final PrintStream OUT =
      new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
  private static volatile boolean stopping = false;

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
    Thread main = Thread.currentThread();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  stopping = true;
                  main.interrupt();
                  try {
                    done.await(spec.path("flush_timeout_s").asLong(30) + 5, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                }));
    int status = 0;
    try {
      if ("producer".equals(role)) {
        new Producing(spec).run();
      } else {
        System.err.println("chaos worker: unknown role " + role + " (expected producer)");
        status = 2;
      }
    } finally {
      OUT.flush();
      done.countDown();
    }
    if (status != 0) {
      System.exit(status);
    }
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

  /** One producer: values run_id:name:seq at rate/s until count values or duration_s. */
  static final class Producing {
    private final String runId;
    private final String name;
    private final String topic;
    private final double rate;
    private final long count;
    private final double durationS;
    private final int keys;
    private final long flushTimeoutS;
    private final Properties props = new Properties();
    private final Map<String, Double> pending = new ConcurrentHashMap<>();

    Producing(JsonNode spec) {
      runId = spec.get("run_id").asText();
      name = spec.get("name").asText();
      topic = spec.get("topic").asText();
      rate = spec.path("rate").isNull() ? 0.0 : spec.path("rate").asDouble(0.0);
      count = spec.path("count").isNull() ? Long.MAX_VALUE : spec.path("count").asLong();
      durationS = spec.path("duration_s").isNull() ? Double.POSITIVE_INFINITY : spec.get("duration_s").asDouble();
      keys = spec.path("keys").asInt(16);
      flushTimeoutS = spec.path("flush_timeout_s").asLong(30);
      Iterator<Map.Entry<String, JsonNode>> config = spec.get("config").fields();
      while (config.hasNext()) {
        Map.Entry<String, JsonNode> item = config.next();
        props.put(item.getKey(), item.getValue().asText());
      }
      props.put("key.serializer", StringSerializer.class.getName());
      props.put("value.serializer", StringSerializer.class.getName());
    }

    void run() {
      double started = mono();
      KafkaProducer<String, String> producer = new KafkaProducer<>(props);
      try {
        for (long seq = 0; seq < count && !stopping; seq++) {
          double now = mono();
          if (now - started >= durationS) {
            break;
          }
          if (rate > 0) {
            double due = started + seq / rate;
            if (due > now + 0.001) {
              try {
                Thread.sleep((long) ((due - now) * 1000));
              } catch (InterruptedException e) {
                break;
              }
            }
          }
          send(producer, seq);
        }
      } finally {
        Thread.interrupted(); // a SIGTERM's interrupt must not cut the flush short
        producer.close(Duration.ofSeconds(flushTimeoutS));
        for (Map.Entry<String, Double> silent : pending.entrySet()) {
          ObjectNode row = event("send_outcome", runId, name);
          row.put("value_id", silent.getKey());
          row.putNull("outcome");
          row.put("error", "_NO_DELIVERY_REPORT");
          row.put("message", "no delivery report before the producer was closed");
          emit(row);
        }
      }
    }

    private void send(KafkaProducer<String, String> producer, long seq) {
      String valueId = runId + ":" + name + ":" + seq;
      String key = "k" + (seq % keys);
      ObjectNode invoke = event("send_invoke", runId, name);
      invoke.put("value_id", valueId);
      invoke.put("producer", name);
      invoke.put("seq", seq);
      invoke.put("topic", topic);
      invoke.put("key", key);
      double at = invoke.get("mono").asDouble();
      emit(invoke);
      pending.put(valueId, at);
      try {
        producer.send(
            new ProducerRecord<>(topic, key, valueId),
            (RecordMetadata metadata, Exception error) -> outcome(valueId, at, metadata, error, false));
      } catch (KafkaException | IllegalStateException e) {
        outcome(valueId, at, null, e, true);
      }
    }

    private void outcome(String valueId, double at, RecordMetadata metadata, Exception error, boolean sync) {
      if (pending.remove(valueId) == null) {
        return; // one outcome per value
      }
      ObjectNode row = event("send_outcome", runId, name);
      row.put("value_id", valueId);
      row.put("latency_ms", (row.get("mono").asDouble() - at) * 1000.0);
      if (error == null) {
        row.put("outcome", "ok");
        row.put("partition", metadata.partition());
        if (metadata.hasOffset()) {
          row.put("offset", metadata.offset());
        }
      } else {
        row.putNull("outcome"); // the parent classifies it
        row.put("error", errorName(error));
        row.put("message", String.valueOf(error));
        row.put("retriable", error instanceof RetriableException);
        row.put("fatal", false);
        row.put("sync", sync);
      }
      emit(row);
    }
  }
}
