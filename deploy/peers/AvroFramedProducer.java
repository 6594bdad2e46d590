// A producer that is not ours, for the tests of streams declared `format: avro`
// (eos_assets_tests/support/registry.py compiles and runs it against .jars/avro): Apache Avro's
// own Java writer and Kafka's Java producer write records in the schema registry's wire format
// (the magic byte 0, the schema id in 4 big-endian bytes, the Avro binary record), as any
// Confluent-compatible serializer frames them.
//
// Arguments, key=value: bootstrap, topic, schema (a file holding the writer's schema, JSON),
// id (that schema's id in the registry), input (a file of records, one a line, in Avro's JSON
// encoding of the schema). It sends every record as the value of one message (no key), waits
// for each acknowledgement, and prints the number sent.

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class AvroFramedProducer {
  private AvroFramedProducer() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    for (String arg : argv) {
      int eq = arg.indexOf('=');
      args.put(arg.substring(0, eq), arg.substring(eq + 1));
    }
    Schema schema = new Schema.Parser().parse(new File(args.get("schema")));
    int id = Integer.parseInt(args.get("id"));
    GenericDatumReader<GenericRecord> reader = new GenericDatumReader<>(schema);
    GenericDatumWriter<GenericRecord> writer = new GenericDatumWriter<>(schema);

    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

    List<String> lines = Files.readAllLines(Path.of(args.get("input")), StandardCharsets.UTF_8);
    int sent = 0;
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      for (String line : lines) {
        if (line.isBlank()) {
          continue;
        }
        GenericRecord record = reader.read(null, DecoderFactory.get().jsonDecoder(schema, line));
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream header = new DataOutputStream(bytes);
        header.writeByte(0);
        header.writeInt(id);
        header.flush();
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(bytes, null);
        writer.write(record, encoder);
        encoder.flush();
        producer.send(new ProducerRecord<>(args.get("topic"), bytes.toByteArray())).get();
        sent++;
      }
    }
    System.out.println(sent);
  }
}
