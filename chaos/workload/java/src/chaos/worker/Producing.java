package chaos.worker;

import static chaos.worker.ChaosWorker.emit;
import static chaos.worker.ChaosWorker.errorName;
import static chaos.worker.ChaosWorker.event;
import static chaos.worker.ChaosWorker.mono;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringSerializer;

/** One producer: values run_id:name:seq at rate/s until count values or duration_s. */
final class Producing {
  private final String runId;
  private final String name;
  private final String topic;
  private final double rate;
  private final long count;
  private final double durationS;
  private final int keys;
  private final long flushTimeoutS;
  private final Properties props;
  private final Map<String, Double> pending = new ConcurrentHashMap<>();

  Producing(JsonNode spec) {
    runId = spec.get("run_id").asText();
    name = spec.get("name").asText();
    topic = spec.get("topic").asText();
    rate = spec.path("rate").isNull() ? 0.0 : spec.path("rate").asDouble(0.0);
    count = spec.path("count").isNull() ? Long.MAX_VALUE : spec.path("count").asLong();
    durationS = spec.path("duration_s").isNull() ? Double.POSITIVE_INFINITY : spec.get("duration_s").asDouble();
    keys = spec.path("keys").asInt(16);
    flushTimeoutS = spec.path("close_timeout_s").asLong(30);
    props = ChaosWorker.properties(spec);
    props.put("key.serializer", StringSerializer.class.getName());
    props.put("value.serializer", StringSerializer.class.getName());
  }

  void run() {
    Thread sender = Thread.currentThread();
    ChaosWorker.onStop(sender::interrupt); // ends a pacing sleep, or a send() blocked on metadata
    double started = mono();
    KafkaProducer<String, String> producer = new KafkaProducer<>(props);
    try {
      for (long seq = 0; seq < count && !ChaosWorker.stopping(); seq++) {
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
