package chaos.example;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A stateless Kafka Streams service: INPUT_TOPIC → mapValues → peek → OUTPUT_TOPIC. The output value is
 * "processed " and the input value, so the record's identity travels in its headers, which Streams copies
 * through stateless operations. PROCESSING_GUARANTEE (exactly_once_v2 or at_least_once), APPLICATION_ID,
 * BOOTSTRAP_SERVERS and COMMIT_INTERVAL_MS come from the environment; everything else is Streams' default
 * (session and poll timeouts are shortened only through STREAMS_SESSION_TIMEOUT_MS).
 */
public final class StreamsService {
  private StreamsService() {}

  private static String env(Map<String, String> env, String name, String fallback) {
    String value = env.get(name);
    if (value == null || value.isEmpty()) {
      if (fallback == null) {
        throw new IllegalArgumentException(name + " is not set");
      }
      return fallback;
    }
    return value;
  }

  public static void main(String[] args) throws InterruptedException {
    Map<String, String> env = System.getenv();
    String input = env(env, "INPUT_TOPIC", null);
    String output = env(env, "OUTPUT_TOPIC", null);
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, env(env, "APPLICATION_ID", null));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env(env, "BOOTSTRAP_SERVERS", null));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, env(env, "PROCESSING_GUARANTEE", "at_least_once"));
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, env(env, "COMMIT_INTERVAL_MS", "1000"));
    props.put(StreamsConfig.CLIENT_ID_CONFIG, env(env, "CLIENT_ID", "streams-service"));
    props.put(StreamsConfig.STATE_DIR_CONFIG, env(env, "STATE_DIR", System.getProperty("java.io.tmpdir")));
    props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 0);
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
    String session = env(env, "STREAMS_SESSION_TIMEOUT_MS", "");
    if (!session.isEmpty()) {
      props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), session);
      props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
    }
    String poll = env(env, "MAX_POLL_INTERVAL_MS", "");
    if (!poll.isEmpty()) {
      props.put(StreamsConfig.consumerPrefix("max.poll.interval.ms"), poll);
    }
    String txnTimeout = env(env, "TRANSACTION_TIMEOUT_MS", "");
    if (!txnTimeout.isEmpty()) {
      props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), txnTimeout);
    }

    AtomicLong processed = new AtomicLong();
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.String()))
        .mapValues(value -> value == null ? null : "processed " + value)
        .peek((key, value) -> processed.incrementAndGet())
        .to(output, Produced.with(Serdes.ByteArray(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    // a stream thread that dies of an error (a transaction timed out while a broker was down) is replaced,
    // as a service that must keep running would do; the error is logged
    streams.setUncaughtExceptionHandler(
        error -> {
          System.out.println("stream thread failed, replaced: " + error);
          return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
    CountDownLatch done = new CountDownLatch(1);
    streams.setStateListener(
        (now, before) -> {
          System.out.println("streams state " + before + " -> " + now);
          if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
            done.countDown();
          }
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close(java.time.Duration.ofSeconds(20));
                  System.out.println("streams closed after " + processed.get() + " records");
                  done.countDown();
                }));
    System.out.println(
        "streams service " + input + " -> " + output + ", " + props.get(StreamsConfig.PROCESSING_GUARANTEE_CONFIG));
    streams.start();
    done.await();
  }
}
