package chaos.worker;

import static chaos.worker.ChaosWorker.BY_PARTITION;
import static chaos.worker.ChaosWorker.awaitStop;
import static chaos.worker.ChaosWorker.emit;
import static chaos.worker.ChaosWorker.errorName;
import static chaos.worker.ChaosWorker.event;
import static chaos.worker.ChaosWorker.mono;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
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
  private final String runId;
  private final String name;
  private final String group;
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
  private KafkaConsumer<String, String> consumer;

  static volatile Member current; // the auto-commit interceptor records through it

  Member(JsonNode spec) {
    runId = spec.get("run_id").asText();
    name = spec.get("name").asText();
    group = spec.get("group").asText();
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
    consumer = new KafkaConsumer<>(props);
    // no wakeup() on the stop: it would throw in the batch's commit, which the librdkafka member makes
    // before it leaves; the loop sees the stop within one poll_timeout_s instead
    double deadline = mono() + durationS;
    try {
      consumer.subscribe(List.of(topic), new Recorder());
      while (!ChaosWorker.stopping() && mono() < deadline) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(pollTimeoutMs));
        if (records.isEmpty()) {
          continue;
        }
        List<ObjectNode> processed = new ArrayList<>();
        for (ConsumerRecord<String, String> record : records) {
          ObjectNode delivery = member("delivery");
          delivery.put("topic", record.topic());
          delivery.put("partition", record.partition());
          delivery.put("offset", record.offset());
          delivery.put("value", record.value()); // the parent turns it into value_id (or null)
          delivery.put("key", record.key());
          if (deliveredWhenProcessed) {
            processed.add(delivery);
          } else {
            emit(delivery);
          }
        }
        if ("commit_before".equals(strategy)) {
          commit(records);
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
          commit(records);
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

  /** An event of this member: run, process, group, member id and generation (null before a join). */
  ObjectNode member(String kind) {
    ObjectNode row = event(kind, runId, name);
    row.put("group", group);
    ConsumerGroupMetadata metadata = consumer.groupMetadata();
    String memberId = metadata.memberId();
    if (memberId == null || memberId.isEmpty()) {
      row.putNull("member");
    } else {
      row.put("member", memberId);
    }
    if (metadata.generationId() < 0) {
      row.putNull("generation");
    } else {
      row.put("generation", metadata.generationId());
    }
    return row;
  }

  private void commit(ConsumerRecords<String, String> records) {
    Map<TopicPartition, OffsetAndMetadata> next = new TreeMap<>(BY_PARTITION);
    for (ConsumerRecord<String, String> record : records) {
      TopicPartition tp = new TopicPartition(record.topic(), record.partition());
      long offset = record.offset() + 1;
      OffsetAndMetadata known = next.get(tp);
      if (known == null || known.offset() < offset) {
        next.put(tp, new OffsetAndMetadata(offset));
      }
    }
    ObjectNode row = member("commit");
    row.set("offsets", offsets(next));
    try {
      consumer.commitSync(next);
      row.put("outcome", "ok");
    } catch (KafkaException e) {
      row.putNull("outcome"); // the parent classifies it
      row.put("error", errorName(e));
      row.put("message", String.valueOf(e));
    }
    emit(row);
  }

  static ArrayNode offsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
    Map<TopicPartition, OffsetAndMetadata> sorted = new TreeMap<>(BY_PARTITION);
    sorted.putAll(offsets);
    ArrayNode list = ChaosWorker.object().arrayNode();
    for (Map.Entry<TopicPartition, OffsetAndMetadata> item : sorted.entrySet()) {
      ObjectNode entry = list.addObject();
      entry.put("topic", item.getKey().topic());
      entry.put("partition", item.getKey().partition());
      entry.put("offset", item.getValue().offset());
      entry.putNull("error");
    }
    return list;
  }

  private void rebalance(String action, Collection<TopicPartition> partitions) {
    ObjectNode row = member("rebalance");
    row.put("action", action);
    ArrayNode list = row.putArray("partitions");
    for (TopicPartition tp : partitions) {
      ObjectNode entry = list.addObject();
      entry.put("topic", tp.topic());
      entry.put("partition", tp.partition());
      entry.putNull("offset");
      entry.putNull("error");
    }
    emit(row);
  }

  private final class Recorder implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      rebalance("assign", partitions);
      if (onAssignS > 0) {
        awaitStop(onAssignS);
      }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      rebalance("revoke", partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      rebalance("lost", partitions);
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
      ObjectNode row = member.member("commit");
      row.put("outcome", "ok");
      row.put("message", "auto-commit");
      row.set("offsets", offsets(offsets));
      emit(row);
    }

    @Override
    public void close() {}

    @Override
    public void configure(Map<String, ?> configs) {}
  }
}
