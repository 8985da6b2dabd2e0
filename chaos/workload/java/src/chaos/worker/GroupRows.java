package chaos.worker;

import static chaos.worker.ChaosWorker.BY_PARTITION;
import static chaos.worker.ChaosWorker.awaitStop;
import static chaos.worker.ChaosWorker.emit;
import static chaos.worker.ChaosWorker.errorName;
import static chaos.worker.ChaosWorker.event;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;

/**
 * The history rows of one group consumer ({@link Member}, {@link Transform}): every row carries the run,
 * the process, the group, the member id and the generation (null before a join), as
 * chaos.workload.common.member_fields does on librdkafka.
 */
final class GroupRows {
  /** chaos.run.events.VALUE_ID_HEADER: the header carrying a record's value id. */
  static final String ID_HEADER = "chaos-id";

  private final String runId;
  private final String name;
  private final String group;
  private KafkaConsumer<String, String> consumer;

  GroupRows(String runId, String name, String group) {
    this.runId = runId;
    this.name = name;
    this.group = group;
  }

  /** The consumer whose group metadata the rows carry (a new instance replaces the last). */
  void use(KafkaConsumer<String, String> consumer) {
    this.consumer = consumer;
  }

  ObjectNode row(String kind) {
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

  /**
   * A delivered record; its {@code value} the parent turns into a value id (or null), and for a tombstone
   * (a null value) its value-id header, {@code id_header}.
   */
  ObjectNode delivery(ConsumerRecord<String, String> record) {
    ObjectNode row = row("delivery");
    row.put("topic", record.topic());
    row.put("partition", record.partition());
    row.put("offset", record.offset());
    row.put("value", record.value());
    row.put("key", record.key());
    if (record.value() == null) {
      row.put("id_header", idHeader(record));
    }
    return row;
  }

  /** The record's value-id header ({@code chaos-id}) as text, or null. */
  static String idHeader(ConsumerRecord<String, String> record) {
    Header header = record.headers().lastHeader(ID_HEADER);
    return header == null || header.value() == null
        ? null
        : new String(header.value(), StandardCharsets.UTF_8);
  }

  /** A synchronous commit of {@code next}, recorded: {@code ok}, or its error for the parent to classify. */
  void commit(Map<TopicPartition, OffsetAndMetadata> next) {
    ObjectNode row = row("commit");
    row.set("offsets", offsets(next));
    try {
      consumer.commitSync(next);
      row.put("outcome", "ok");
    } catch (KafkaException e) {
      row.putNull("outcome");
      row.put("error", errorName(e));
      row.put("message", String.valueOf(e));
    }
    emit(row);
  }

  /** Records each rebalance callback; waits {@code onAssignS} in each assignment (the spec's cost). */
  ConsumerRebalanceListener listener(double onAssignS) {
    return new ConsumerRebalanceListener() {
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
    };
  }

  private void rebalance(String action, Collection<TopicPartition> partitions) {
    ObjectNode row = row("rebalance");
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

  /** Per partition of {@code records}, the offset after its last record: what a commit of them sends. */
  static Map<TopicPartition, OffsetAndMetadata> nextOffsets(ConsumerRecords<String, String> records) {
    Map<TopicPartition, OffsetAndMetadata> next = new TreeMap<>(BY_PARTITION);
    for (ConsumerRecord<String, String> record : records) {
      TopicPartition tp = new TopicPartition(record.topic(), record.partition());
      long offset = record.offset() + 1;
      OffsetAndMetadata known = next.get(tp);
      if (known == null || known.offset() < offset) {
        next.put(tp, new OffsetAndMetadata(offset));
      }
    }
    return next;
  }

  /** Offsets as the rows' list of {topic, partition, offset, error}, in partition order. */
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
}
