import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * A Kafka Connect source for test_kafka_connect.py: writes "seq-0", "seq-1", ...
 * up to {@code count} records to {@code topic}, its position kept in Connect's
 * offsets topic, so that a worker started again goes on from where the last
 * one stopped.
 */
public class SeqSourceConnector extends SourceConnector {
    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SeqTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef()
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "where to write")
            .define("count", ConfigDef.Type.LONG, ConfigDef.Importance.HIGH, "how many");
    }

    @Override
    public String version() {
        return "1";
    }

    public static class SeqTask extends SourceTask {
        private static final Map<String, String> PARTITION = Collections.singletonMap("source", "seq");
        private String topic;
        private long count;
        private long next;

        @Override
        public String version() {
            return "1";
        }

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            count = Long.parseLong(props.get("count"));
            Map<String, Object> offset = context.offsetStorageReader().offset(PARTITION);
            next = offset == null ? 0 : ((Number) offset.get("seq")).longValue() + 1;
            System.out.println("SEQ START " + next);
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= count) {
                Thread.sleep(100);
                return null;
            }
            List<SourceRecord> out = new ArrayList<>();
            for (int i = 0; i < 50 && next < count; i++, next++) {
                out.add(new SourceRecord(PARTITION, Collections.singletonMap("seq", next), topic,
                                         null, Schema.STRING_SCHEMA, "seq-" + next));
            }
            return out;
        }

        @Override
        public void stop() {
        }
    }
}
