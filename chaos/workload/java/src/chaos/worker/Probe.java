package chaos.worker;

import static chaos.worker.ChaosWorker.emit;
import static chaos.worker.ChaosWorker.event;
import static chaos.worker.ChaosWorker.mono;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * What an application's fresh consumer does first, as chaos.workload.readers.startup_probe on librdkafka:
 * {@code partitionsFor(topic, T)} (operation {@code metadata}), then with a group {@code committed(every
 * partition, T)} (operation {@code committed}); each call one {@code probe_call} row. The consumer never
 * subscribes. Exits 0 when every call succeeded, 1 when one failed (the row says how).
 */
final class Probe {
  /** librdkafka's OFFSET_INVALID: what its committed() reports for a partition without a commit. */
  private static final long NO_OFFSET = -1001;

  private final String runId;
  private final String name;
  private final String topic;
  private final boolean group;
  private final long timeoutMs;
  private final Properties props;

  Probe(JsonNode spec) {
    runId = spec.get("run_id").asText();
    name = spec.get("name").asText();
    topic = spec.get("topic").asText();
    group = spec.get("group").asBoolean();
    timeoutMs = (long) (spec.get("timeout_s").asDouble() * 1000);
    props = ChaosWorker.properties(spec);
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    props.put("default.api.timeout.ms", String.valueOf(timeoutMs));
  }

  /** 0 when every call succeeded, else 1. */
  int run() {
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      double started = mono();
      List<PartitionInfo> partitions;
      try {
        partitions = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs));
      } catch (KafkaException e) {
        emit(failed(call("metadata", started), e));
        return 1;
      }
      ObjectNode metadata = call("metadata", started);
      metadata.put("result", partitions.size() + " partitions");
      emit(metadata);
      if (!group) {
        return 0;
      }
      Set<TopicPartition> wanted =
          partitions.stream()
              .map(p -> new TopicPartition(topic, p.partition()))
              .collect(Collectors.toCollection(() -> new TreeSet<>(ChaosWorker.BY_PARTITION)));
      started = mono();
      Map<TopicPartition, OffsetAndMetadata> committed;
      try {
        committed = consumer.committed(wanted, Duration.ofMillis(timeoutMs));
      } catch (KafkaException e) {
        emit(failed(call("committed", started), e));
        return 1;
      }
      ObjectNode row = call("committed", started);
      row.put(
          "result",
          wanted.stream()
              .map(tp -> tp.partition() + ":" + offset(committed.get(tp)))
              .collect(Collectors.joining(" ")));
      emit(row);
      return 0;
    }
  }

  private static long offset(OffsetAndMetadata committed) {
    return committed == null ? NO_OFFSET : committed.offset();
  }

  private ObjectNode call(String operation, double started) {
    ObjectNode row = event("probe_call", runId, name);
    row.put("operation", operation);
    row.put("duration_ms", (mono() - started) * 1000);
    row.put("timeout_ms", (double) timeoutMs);
    row.put("topic", topic);
    return row;
  }

  /** A failed call: the exception's class (the Java client's words, e.g. TimeoutException) and message. */
  private static ObjectNode failed(ObjectNode row, KafkaException e) {
    row.put("error", e.getClass().getSimpleName());
    row.put("message", String.valueOf(e.getMessage()));
    return row;
  }
}
