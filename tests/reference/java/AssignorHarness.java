/*
 * Runs Apache Kafka's own server-side assignors (UniformAssignor, RangeAssignor)
 * on scenarios read from stdin, one JSON object a line, and prints each answer
 * as one JSON line: the reference for broker/groups/assignors.py, compiled and
 * run by tests/reference/test_differential_assignors.py against Kafka's jars.
 *
 * A scenario:
 *   {"assignor": "uniform" | "range",
 *    "type": null | "HOMOGENEOUS" | "HETEROGENEOUS",   (null: decided as Kafka does)
 *    "topics": [[topic id, name, partition count], ...],
 *    "members": [{"id": ..., "instance": null | ..., "rack": null | ...,
 *                 "subscribed": [topic id, ...],
 *                 "assigned": [[topic id, [partition, ...]], ...]}, ...]}
 * Topic ids are java.util.UUID strings.  The answer is {"assignment": {member id:
 * {topic id: [partition, ...]}}} or {"error": "<exception class>: <message>"}.
 *
 * The group is built the way Kafka 4.4's coordinator builds it for an
 * assignor (TargetAssignmentBuilder.build): the members put into a HashMap in
 * the scenario's order; each member's subscription a TopicIds over a
 * HashSet<String> copy of its topic names listed in String.compareTo order (as
 * ConsumerGroupMember.Builder.setSubscribedTopicNames copies the names it is
 * given); each member's current target assignment as Assignment.fromRecord
 * rebuilds it from a record listing the topics in Uuid.compareTo order and the
 * partitions ascending; the inverted assignment from those; the subscription
 * type from the per-name subscriber counts (ModernGroup.subscriptionType).
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberValue;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.apache.kafka.coordinator.group.modern.ModernGroup;
import org.apache.kafka.coordinator.group.modern.SubscriptionCount;
import org.apache.kafka.coordinator.group.modern.TopicIds;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

public final class AssignorHarness {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            ObjectNode answer = JSON.createObjectNode();
            try {
                answer.set("assignment", run(JSON.readTree(line)));
            } catch (Exception e) {
                answer.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            out.println(JSON.writeValueAsString(answer));
            out.flush();
        }
    }

    private static Uuid uuid(String text) {
        java.util.UUID u = java.util.UUID.fromString(text);
        return new Uuid(u.getMostSignificantBits(), u.getLeastSignificantBits());
    }

    private static String text(Uuid id) {
        return new java.util.UUID(id.getMostSignificantBits(), id.getLeastSignificantBits()).toString();
    }

    private static String optionalText(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }

    /** Names and ids resolved from the scenario's topics (a CachedTopicResolver stand-in). */
    private static final class Resolver implements TopicIds.TopicResolver {
        final Map<String, Uuid> ids = new HashMap<>();
        final Map<Uuid, String> names = new HashMap<>();

        @Override
        public CoordinatorMetadataImage image() {
            return CoordinatorMetadataImage.EMPTY;
        }

        @Override
        public String name(Uuid id) {
            return names.get(id);
        }

        @Override
        public Uuid id(String name) {
            return ids.get(name);
        }

        @Override
        public void clear() {
        }
    }

    private static ObjectNode run(JsonNode scenario) {
        Resolver resolver = new Resolver();
        Map<Uuid, Integer> partitionCounts = new HashMap<>();
        for (JsonNode topic : scenario.get("topics")) {
            Uuid id = uuid(topic.get(0).asText());
            String name = topic.get(1).asText();
            resolver.ids.put(name, id);
            resolver.names.put(id, name);
            partitionCounts.put(id, topic.get(2).asInt());
        }

        Map<String, MemberSubscriptionAndAssignmentImpl> memberSpecs = new HashMap<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        Map<String, SubscriptionCount> subscribedTopicNames = new HashMap<>();
        for (JsonNode member : scenario.get("members")) {
            String memberId = member.get("id").asText();

            List<String> names = new ArrayList<>();
            for (JsonNode id : member.get("subscribed")) {
                Uuid topicId = uuid(id.asText());
                if (!resolver.names.containsKey(topicId)) {
                    // Resolvable but absent from the metadata: Kafka's assignors refuse it.
                    resolver.names.put(topicId, "unknown-" + id.asText());
                    resolver.ids.put("unknown-" + id.asText(), topicId);
                }
                names.add(resolver.names.get(topicId));
            }
            Collections.sort(names);
            Set<String> nameSet = new HashSet<>(names);
            for (String name : nameSet) {
                subscribedTopicNames.compute(name, SubscriptionCount::incNameCount);
            }

            // The record's topics in Uuid.compareTo order, partitions ascending.
            Map<Uuid, TreeSet<Integer>> sorted = new TreeMap<>();
            for (JsonNode entry : member.get("assigned")) {
                TreeSet<Integer> partitions = new TreeSet<>();
                for (JsonNode p : entry.get(1)) partitions.add(p.asInt());
                if (!partitions.isEmpty()) sorted.put(uuid(entry.get(0).asText()), partitions);
            }
            List<ConsumerGroupTargetAssignmentMemberValue.TopicPartition> record = new ArrayList<>();
            for (Map.Entry<Uuid, TreeSet<Integer>> entry : sorted.entrySet()) {
                record.add(new ConsumerGroupTargetAssignmentMemberValue.TopicPartition()
                    .setTopicId(entry.getKey())
                    .setPartitions(new ArrayList<>(entry.getValue())));
                for (int p : entry.getValue()) {
                    inverted.computeIfAbsent(entry.getKey(), k -> new HashMap<>()).put(p, memberId);
                }
            }
            Assignment assignment = Assignment.fromRecord(
                new ConsumerGroupTargetAssignmentMemberValue().setTopicPartitions(record));

            memberSpecs.put(memberId, new MemberSubscriptionAndAssignmentImpl(
                Optional.ofNullable(optionalText(member.get("rack"))),
                Optional.ofNullable(optionalText(member.get("instance"))),
                new TopicIds(nameSet, resolver),
                assignment));
        }

        String typeName = optionalText(scenario.get("type"));
        SubscriptionType type = typeName != null
            ? SubscriptionType.valueOf(typeName)
            : ModernGroup.subscriptionType(subscribedTopicNames, memberSpecs.size());

        SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
            @Override
            public int numPartitions(Uuid topicId) {
                return partitionCounts.getOrDefault(topicId, -1);
            }

            @Override
            public Set<String> racksForPartition(Uuid topicId, int partition) {
                return Set.of();
            }
        };

        String name = scenario.get("assignor").asText();
        ConsumerGroupPartitionAssignor assignor;
        if (name.equals("uniform")) {
            assignor = new UniformAssignor();
        } else if (name.equals("range")) {
            assignor = new RangeAssignor();
        } else {
            throw new IllegalArgumentException("unknown assignor " + name);
        }
        GroupAssignment result = assignor.assign(
            new GroupSpecImpl(Collections.unmodifiableMap(memberSpecs), type, inverted), describer);

        ObjectNode members = JSON.createObjectNode();
        for (Map.Entry<String, MemberAssignment> member : result.members().entrySet()) {
            ObjectNode topics = members.putObject(member.getKey());
            for (Map.Entry<Uuid, Set<Integer>> topic : member.getValue().partitions().entrySet()) {
                ArrayNode partitions = topics.putArray(text(topic.getKey()));
                for (int p : new TreeSet<>(topic.getValue())) partitions.add(p);
            }
        }
        return members;
    }
}
