// The bench's Kafka Streams peer (eos_assets/bench/kstreams.py compiles and runs it against
// .jars/kafka-streams): what a user of Kafka Streams would write for gold/window_aggregates.
//
// Valid events of the input topic, deduplicated by event_id in a state store (re-sent events
// carry the order's key, so they reach the same task), counted per event type and currency in
// 5-minute tumbling event-time windows with a 10-minute grace; every count update goes to the
// output topic (key "<window start ms>|<event type>|<currency>", value the count).
//
// Arguments, key=value: bootstrap, input, output, app, state, guarantee (exactly_once_v2 or
// at_least_once), expected (input records to wait for), quiet_ms, idle_ms, timeout_ms,
// commit_ms (100 unless given; "default" leaves Kafka Streams' own: 100 ms under
// exactly_once_v2, 30 s under at_least_once); any prop.<name>=<value> is passed to Kafka
// Streams as <name> (e.g. prop.main.consumer.*).
// It prints "running" once Kafka Streams is RUNNING; it stops once it has read `expected`
// records and no count changed for quiet_ms, then prints one JSON line: records, seconds (start
// to the last count update), dropped records, the commit interval in effect.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class WindowCountPeer {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Set<String> TYPES =
      Set.of("order_created", "order_paid", "order_cancelled", "order_refunded");
  private static final AtomicLong READ = new AtomicLong();
  private static final AtomicLong LAST_UPDATE = new AtomicLong();

  /** "<event_id>|<event type>|<currency>" of a valid event, null for a malformed record. */
  static String parse(byte[] value) {
    try {
      JsonNode n = JSON.readTree(value);
      String id = n.path("event_id").asText("");
      String type = n.path("event_type").asText("");
      JsonNode currency = n.path("currency");
      if (id.isEmpty() || !TYPES.contains(type) || !n.path("amount").isNumber()) return null;
      Instant.parse(n.path("event_time").asText(""));
      return id + "|" + type + "|" + (currency.isTextual() ? currency.asText() : "");
    } catch (Exception e) {
      return null;
    }
  }

  /** Event time of a valid event; the Kafka timestamp of any other record (it is dropped). */
  public static final class EventTime implements TimestampExtractor {
    @Override
    public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
      try {
        JsonNode n = JSON.readTree((byte[]) record.value());
        return Instant.parse(n.path("event_time").asText("")).toEpochMilli();
      } catch (Exception e) {
        return record.timestamp();
      }
    }
  }

  /** First delivery of an event_id wins; its value becomes "<event type>|<currency>". */
  static final class Dedup implements FixedKeyProcessor<String, String, String> {
    private FixedKeyProcessorContext<String, String> context;
    private KeyValueStore<String, Long> seen;

    @Override
    public void init(FixedKeyProcessorContext<String, String> context) {
      this.context = context;
      this.seen = context.getStateStore("seen");
    }

    @Override
    public void process(FixedKeyRecord<String, String> record) {
      String[] f = record.value().split("\\|", 2);
      if (seen.get(f[0]) == null) {
        seen.put(f[0], record.timestamp());
        context.forward(record.withValue(f[1]));
      }
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (String arg : args) a.put(arg.substring(0, arg.indexOf('=')), arg.substring(arg.indexOf('=') + 1));
    long expected = Long.parseLong(a.get("expected"));
    long quietMs = Long.parseLong(a.getOrDefault("quiet_ms", "5000"));
    long timeoutMs = Long.parseLong(a.getOrDefault("timeout_ms", "600000"));

    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.get("app"));
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, a.get("guarantee"));
    p.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state"));
    // The same commit interval under both guarantees (exactly_once_v2's default), so that the
    // difference between the two runs is the transactions, not how often counts are flushed.
    String commitMs = a.getOrDefault("commit_ms", "100");
    if (!commitMs.equals("default")) p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
    // A task with several input partitions waits this long for the laggards before advancing
    // its stream time (the backlog trap: windows would close before their events are read).
    p.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, a.getOrDefault("idle_ms", "5000"));
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    a.forEach((k, v) -> { if (k.startsWith("prop.")) p.put(k.substring(5), v); });

    StreamsBuilder b = new StreamsBuilder();
    b.addStateStore(
        Stores.keyValueStoreBuilder(
            Stores.persistentKeyValueStore("seen"), Serdes.String(), Serdes.Long()));
    b.stream(
            a.get("input"),
            Consumed.with(Serdes.String(), Serdes.ByteArray())
                .withTimestampExtractor(new EventTime()))
        .peek((k, v) -> READ.incrementAndGet())
        .mapValues(WindowCountPeer::parse)
        .filter((k, v) -> v != null)
        .processValues(Dedup::new, "seen")
        .groupBy((k, v) -> v, Grouped.with("by-type-currency", Serdes.String(), Serdes.String()))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(10)))
        .count()
        .toStream()
        .peek((k, v) -> LAST_UPDATE.set(System.nanoTime()))
        .map((w, c) -> KeyValue.pair(w.window().start() + "|" + w.key(), Long.toString(c)))
        .to(a.get("output"), Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    long began = System.nanoTime();
    LAST_UPDATE.set(began);
    streams.setUncaughtExceptionHandler(
        e -> {
          e.printStackTrace();
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    streams.setStateListener(
        (now, before) -> {
          if (now == KafkaStreams.State.RUNNING) {
            System.out.println("running");
            System.out.flush();
          }
        });
    streams.start();
    long deadline = began + timeoutMs * 1_000_000L;
    while (true) {
      Thread.sleep(200);
      long now = System.nanoTime();
      KafkaStreams.State state = streams.state();
      if (state == KafkaStreams.State.ERROR || state == KafkaStreams.State.NOT_RUNNING) {
        throw new IllegalStateException("Kafka Streams stopped: " + state);
      }
      if (now > deadline) throw new IllegalStateException("timed out after reading " + READ.get());
      if (READ.get() >= expected && now - LAST_UPDATE.get() > quietMs * 1_000_000L) break;
    }
    double dropped = 0;
    for (var m : streams.metrics().entrySet()) {
      if (m.getKey().name().equals("dropped-records-total") && m.getKey().group().equals("stream-task-metrics")) {
        dropped += ((Number) m.getValue().metricValue()).doubleValue();
      }
    }
    double seconds = (LAST_UPDATE.get() - began) / 1e9;
    long commitInterval = new StreamsConfig(p).getLong(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG);
    streams.close(Duration.ofSeconds(60));
    System.out.printf(
        "{\"records\": %d, \"seconds\": %.3f, \"dropped\": %d, \"commit_ms\": %d}%n",
        READ.get(), seconds, (long) dropped, commitInterval);
  }
}
