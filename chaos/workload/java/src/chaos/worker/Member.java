package chaos.worker;

import static chaos.worker.ChaosWorker.awaitStop;
import static chaos.worker.ChaosWorker.emit;
import static chaos.worker.ChaosWorker.mono;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One consumer-group member, as chaos.workload.consumer.run_member on librdkafka: subscribe to the topic,
 * record each rebalance callback, each delivered record and each commit, process with the spec's delays,
 * commit as its strategy says ({@code commit_after}: synchronously after the batch, {@code commit_before}:
 * before processing it, {@code auto}: the client's auto-commit, recorded by {@link AutoCommits}); close
 * gracefully (LeaveGroup) at the end or on SIGTERM (the batch in hand is finished and committed first, its
 * delays cut short, as the librdkafka member does).
 */
final class Member {
  private final String topic;
  private final String strategy;
  private final double durationS;
  private final long pollTimeoutMs;
  private final double perRecordS;
  private final double perBatchS;
  private final double onAssignS;
  private final boolean deliveredWhenProcessed;
  private final long closeTimeoutS;
  private final Properties props;
  private final GroupRows rows;

  static volatile Member current; // the auto-commit interceptor records through it

  Member(JsonNode spec) {
    rows =
        new GroupRows(
            spec.get("run_id").asText(), spec.get("name").asText(), spec.get("group").asText());
    topic = spec.get("topic").asText();
    strategy = spec.get("strategy").asText();
    durationS = spec.get("duration_s").asDouble();
    pollTimeoutMs = (long) (spec.get("poll_timeout_s").asDouble() * 1000);
    JsonNode processing = spec.get("processing");
    perRecordS = processing.path("per_record_s").asDouble(0);
    perBatchS = processing.path("per_batch_s").asDouble(0);
    onAssignS = processing.path("on_assign_s").asDouble(0);
    deliveredWhenProcessed = "processed".equals(spec.path("record_delivery").asText("consume"));
    closeTimeoutS = spec.path("close_timeout_s").asLong(30);
    props = ChaosWorker.properties(spec);
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    props.put("max.poll.records", String.valueOf(spec.get("batch_size").asInt()));
    if ("auto".equals(strategy)) {
      props.put("interceptor.classes", AutoCommits.class.getName());
    }
  }

  void run() {
    current = this;
    KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
    rows.use(consumer);
    // no wakeup() on the stop: it would throw in the batch's commit, which the librdkafka member makes
    // before it leaves; the loop sees the stop within one poll_timeout_s instead
    double deadline = mono() + durationS;
    try {
      consumer.subscribe(List.of(topic), rows.listener(onAssignS));
      while (!ChaosWorker.stopping() && mono() < deadline) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(pollTimeoutMs));
        if (records.isEmpty()) {
          continue;
        }
        List<ObjectNode> processed = new ArrayList<>();
        for (ConsumerRecord<String, String> record : records) {
          ObjectNode delivery = rows.delivery(record);
          if (deliveredWhenProcessed) {
            processed.add(delivery);
          } else {
            emit(delivery);
          }
        }
        if ("commit_before".equals(strategy)) {
          rows.commit(GroupRows.nextOffsets(records));
        }
        for (int index = 0; index < records.count(); index++) {
          if (perRecordS > 0) {
            awaitStop(perRecordS);
          }
          if (deliveredWhenProcessed) {
            emit(processed.get(index));
          }
        }
        if (perBatchS > 0) {
          awaitStop(perBatchS);
        }
        if ("commit_after".equals(strategy)) {
          rows.commit(GroupRows.nextOffsets(records));
        }
      }
    } finally {
      Thread.interrupted();
      try {
        consumer.close(Duration.ofSeconds(closeTimeoutS)); // auto strategies commit; LeaveGroup
      } catch (KafkaException e) {
        System.err.println("ERROR chaos.worker.Member - close: " + e);
      }
    }
  }

  /** Records the client's auto-commits (strategy auto): the Java client has no commit callback for them. */
  public static final class AutoCommits implements ConsumerInterceptor<String, String> {
    @Override
    public ConsumerRecords<String, String> onConsume(ConsumerRecords<String, String> records) {
      return records;
    }

    @Override
    public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
      Member member = current;
      if (member == null || offsets.isEmpty()) {
        return;
      }
      ObjectNode row = member.rows.row("commit");
      row.put("outcome", "ok");
      row.put("message", "auto-commit");
      row.set("offsets", GroupRows.offsets(offsets));
      emit(row);
    }

    @Override
    public void close() {}

    @Override
    public void configure(Map<String, ?> configs) {}
  }
}
