package chaos.worker;

import static chaos.worker.ChaosWorker.awaitStop;
import static chaos.worker.ChaosWorker.emit;
import static chaos.worker.ChaosWorker.errorName;
import static chaos.worker.ChaosWorker.event;
import static chaos.worker.ChaosWorker.mono;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The consume-transform-produce worker, as chaos.workload.transactional on librdkafka: poll a batch of the
 * input topic (read_committed, no auto commit), {@code beginTransaction()}, send each record's value and key
 * unchanged to the output topic, {@code sendOffsetsToTransaction()} with the batch's next offsets and the
 * consumer's group metadata, {@code commitTransaction()}. Rows: a delivery per input record, a {@code txn}
 * row {@code begin}, then {@code commit} (its values, for the parent to turn into value ids, and offsets)
 * or {@code abort}. A retriable commit error is retried (3 attempts); an abortable one aborts and rewinds
 * the consumer to its committed offsets; a fatal one (fenced, out of order, unauthorized) records the
 * commit {@code info} and ends the instance — which starts again (new clients, the same transactional.id)
 * up to {@code restarts} times. Without {@code transactional}: produce, flush, then commit the offsets with
 * the consumer (a {@code commit} row). {@code crash_in_txn} n: SIGKILL itself in the n-th batch, after the
 * batch was flushed to the log and before its commit. The transactional calls are bounded by {@code
 * max.block.ms} = the spec's API timeout (librdkafka's calls take it as their timeout argument).
 */
final class Transform {
  private static final int COMMIT_ATTEMPTS = 3;

  private final String runId;
  private final String name;
  private final String input;
  private final String output;
  private final long pollTimeoutMs;
  private final double durationS;
  private final long timeoutMs;
  private final int crashInTxn;
  private final boolean transactional;
  private final double perRecordS;
  private final double perBatchS;
  private final double onAssignS;
  private final int restarts;
  private final Properties consumerProps;
  private final Properties producerProps;
  private final String transactionalId;
  private final GroupRows rows;
  private int txns;

  Transform(JsonNode spec) {
    runId = spec.get("run_id").asText();
    name = spec.get("name").asText();
    rows = new GroupRows(runId, name, spec.get("group").asText());
    input = spec.get("input_topic").asText();
    output = spec.get("output_topic").asText();
    pollTimeoutMs = (long) (spec.get("poll_timeout_s").asDouble() * 1000);
    durationS = spec.get("duration_s").asDouble();
    timeoutMs = (long) (spec.get("api_timeout_s").asDouble() * 1000);
    crashInTxn = spec.path("crash_in_txn").asInt(0);
    transactional = spec.get("transactional").asBoolean();
    JsonNode processing = spec.get("processing");
    perRecordS = processing.path("per_record_s").asDouble(0);
    perBatchS = processing.path("per_batch_s").asDouble(0);
    onAssignS = processing.path("on_assign_s").asDouble(0);
    restarts = spec.path("restarts").asInt(0);
    consumerProps = ChaosWorker.propertiesOf(spec.get("consumer_config"));
    consumerProps.put("key.deserializer", StringDeserializer.class.getName());
    consumerProps.put("value.deserializer", StringDeserializer.class.getName());
    consumerProps.put("max.poll.records", String.valueOf(spec.get("batch_size").asInt()));
    producerProps = ChaosWorker.propertiesOf(spec.get("producer_config"));
    producerProps.put("key.serializer", StringSerializer.class.getName());
    producerProps.put("value.serializer", StringSerializer.class.getName());
    producerProps.put("max.block.ms", String.valueOf(timeoutMs));
    transactionalId = producerProps.getProperty("transactional.id", "");
  }

  void run() {
    double deadline = mono() + durationS;
    for (int instance = 1; ; instance++) {
      try {
        runInstance(deadline);
        return;
      } catch (KafkaException e) {
        if (instance > restarts || ChaosWorker.stopping()) {
          throw e;
        }
        boolean fatal = fatal(e);
        ObjectNode row = event("client_log", runId, name);
        row.put("level", fatal ? "critical" : "warning");
        row.put("facility", fatal ? "CLIENT_FATAL" : "CLIENT_RESTART");
        row.put("error", errorName(e));
        row.put("fatal", fatal);
        row.put(
            "message",
            "instance "
                + instance
                + " ended by "
                + e
                + "; its clients were closed, a new instance started (restart "
                + instance
                + " of at most "
                + restarts
                + ")");
        emit(row);
      }
    }
  }

  private static boolean fatal(KafkaException e) {
    return e instanceof ProducerFencedException
        || e instanceof OutOfOrderSequenceException
        || e instanceof AuthorizationException
        || e instanceof UnsupportedVersionException
        || e instanceof InvalidProducerEpochException;
  }

  private void runInstance(double deadline) {
    Duration close = Duration.ofMillis(timeoutMs);
    KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps);
    KafkaConsumer<String, String> consumer = null;
    try {
      if (transactional) {
        double started = mono();
        producer.initTransactions(); // fences earlier instances of the id, aborts their open transaction
        ObjectNode row = event("client_log", runId, name);
        row.put("level", "info");
        row.put("facility", "TXN_INIT");
        row.put(
            "message",
            String.format(
                "init_transactions(%s) returned in %.0f ms", transactionalId, (mono() - started) * 1000));
        emit(row);
      }
      consumer = new KafkaConsumer<>(consumerProps);
      rows.use(consumer);
      consumer.subscribe(List.of(input), rows.listener(onAssignS));
      while (!ChaosWorker.stopping() && mono() < deadline) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(pollTimeoutMs));
        if (!records.isEmpty()) {
          batch(producer, consumer, records);
        }
      }
    } finally {
      Thread.interrupted();
      try {
        if (consumer != null) {
          consumer.close(close);
        }
      } finally {
        producer.close(close);
      }
    }
  }

  private void batch(
      KafkaProducer<String, String> producer,
      KafkaConsumer<String, String> consumer,
      ConsumerRecords<String, String> records) {
    txns++;
    if (transactional) {
      producer.beginTransaction();
      emit(marker("begin", "ok", null, null, null));
    }
    ArrayNode values = ChaosWorker.object().arrayNode();
    for (ConsumerRecord<String, String> record : records) {
      emit(rows.delivery(record));
      producer.send(new ProducerRecord<>(output, null, record.key(), record.value(), record.headers()));
      values.add(record.value() != null ? record.value() : GroupRows.idHeader(record));
      if (perRecordS > 0) {
        awaitStop(perRecordS);
      }
    }
    if (perBatchS > 0) {
      awaitStop(perBatchS);
    }
    if (crashInTxn == txns) {
      producer.flush(); // the records are in the log, the transaction (if any) open
      killSelf();
    }
    Map<TopicPartition, OffsetAndMetadata> next = GroupRows.nextOffsets(records);
    if (!transactional) {
      producer.flush();
      rows.commit(next);
      return;
    }
    ArrayNode offsets = GroupRows.offsets(next);
    boolean offsetsSent = false;
    for (int attempt = 1; ; attempt++) {
      try {
        if (!offsetsSent) { // again after a retriable failure: never commit without them
          producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
          offsetsSent = true;
        }
        producer.commitTransaction();
        emit(marker("commit", "ok", values, offsets, null));
        return;
      } catch (KafkaException e) {
        if (fatal(e) || (e instanceof RetriableException && attempt >= COMMIT_ATTEMPTS)) {
          emit(marker("commit", "info", values, offsets, e)); // it may or may not have happened
          throw e;
        }
        if (e instanceof RetriableException) {
          continue;
        }
        producer.abortTransaction();
        emit(marker("abort", "ok", values, offsets, e)); // error names the cause
        rewind(consumer);
        return;
      }
    }
  }

  /** Seek every assigned partition back to its committed offset (the beginning when none). */
  private void rewind(KafkaConsumer<String, String> consumer) {
    Set<TopicPartition> assigned = consumer.assignment();
    if (assigned.isEmpty()) {
      return;
    }
    Map<TopicPartition, OffsetAndMetadata> committed =
        consumer.committed(assigned, Duration.ofMillis(timeoutMs));
    for (TopicPartition tp : assigned) {
      OffsetAndMetadata offset = committed.get(tp);
      if (offset == null) {
        consumer.seekToBeginning(List.of(tp));
      } else {
        consumer.seek(tp, offset.offset());
      }
    }
  }

  private ObjectNode marker(
      String action, String outcome, ArrayNode values, ArrayNode offsets, KafkaException error) {
    ObjectNode row = event("txn", runId, name);
    row.put("action", action);
    row.put("transactional_id", transactionalId);
    row.put("outcome", outcome);
    row.set("values", values == null ? ChaosWorker.object().arrayNode() : values);
    row.set("offsets", offsets == null ? ChaosWorker.object().arrayNode() : offsets);
    if (error != null) {
      row.put("error", errorName(error));
      row.put("message", String.valueOf(error.getMessage()));
    }
    return row;
  }

  /** A real SIGKILL (the process's exit status says so, as the librdkafka worker's os.kill does). */
  private static void killSelf() {
    String pid = String.valueOf(ProcessHandle.current().pid());
    try {
      new ProcessBuilder("kill", "-KILL", pid).inheritIO().start().waitFor();
    } catch (IOException e) {
      Runtime.getRuntime().halt(137);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    Runtime.getRuntime().halt(137); // not reached once the signal landed
  }
}
