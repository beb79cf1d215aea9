// MirrorMaker 2's own client-side offset translation, for tests/mm2_interop.rs: prints what
// RemoteClusterUtils.translateOffsets returns, one "topic partition offset" line per partition,
// sorted by topic then partition. Run with Java's single-source-file mode:
//   java -cp '<kafka libs>/*' TranslateOffsets.java <target bootstrap> <source alias> <group>

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: TranslateOffsets <target bootstrap> <source alias> <group>");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(30));
        List<TopicPartition> partitions = new ArrayList<>(offsets.keySet());
        partitions.sort(Comparator.comparing(TopicPartition::topic)
            .thenComparingInt(TopicPartition::partition));
        for (TopicPartition tp : partitions) {
            System.out.println(tp.topic() + " " + tp.partition() + " " + offsets.get(tp).offset());
        }
    }
}
