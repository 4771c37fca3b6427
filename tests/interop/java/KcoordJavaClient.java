// Apache Kafka's Java client (kafka-clients) driven by the interop tests
// (tests/interop/java_client.py compiles and runs it).
//
//   member  key=value...   a consumer group member that keeps a JSON state
//                          file, as the Python and kafkajs workers do; SIGTERM
//                          closes it (LeaveGroup, or a leave heartbeat)
//   produce key=value...   produces messages, prints one JSON line
//   transform key=value... a transactional consume-transform-produce loop
//                          (KIP-447: offsets sent with the group's metadata)
//   admin   op=... key=value...
//                          one Admin call, prints one JSON line (groups,
//                          offsets, delegation tokens)
//
// Output is JSON built by hand: the classpath holds only kafka-clients and
// the compression libraries it loads.

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.utils.SecurityUtils;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KcoordJavaClient {
    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw new IllegalArgumentException("usage: member|produce|admin key=value...");
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("not key=value: " + argv[i]);
            }
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        switch (argv[0]) {
            case "member" -> new Member(args).run();
            case "produce" -> System.out.println(produce(args));
            case "transform" -> System.out.println(transform(args));
            case "admin" -> System.out.println(admin(args));
            default -> throw new IllegalArgumentException("unknown command " + argv[0]);
        }
    }

    /** Client settings given as `prop.<name>=<value>` arguments. */
    static Properties props(Map<String, String> args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args.get("bootstrap"));
        args.forEach((k, v) -> {
            if (k.startsWith("prop.")) {
                p.put(k.substring(5), v);
            }
        });
        return p;
    }

    /** A group consumer's settings: `group`, `strategy` (range, roundrobin,
     *  cooperative-sticky: the classic protocol; consumer: KIP-848),
     *  `session_ms` (classic), `instance`, `client`. */
    static Properties consumerProps(Map<String, String> args) {
        Properties p = props(args);
        p.put("group.id", args.get("group"));
        p.put("client.id", args.getOrDefault("client", "kcoord-interop-java"));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        String strategy = args.getOrDefault("strategy", "range");
        if (strategy.equals("consumer")) {
            p.put("group.protocol", "consumer");
        } else {
            p.put("group.protocol", "classic");
            p.put("partition.assignment.strategy", switch (strategy) {
                case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
                case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                default -> throw new IllegalArgumentException("strategy " + strategy);
            });
            p.put("session.timeout.ms", args.getOrDefault("session_ms", "6000"));
            p.put("heartbeat.interval.ms", "500");
        }
        if (args.containsKey("instance")) {
            p.put("group.instance.id", args.get("instance"));
        }
        return p;
    }

    // ---- member ----------------------------------------------------------

    static final class Member implements ConsumerRebalanceListener {
        final Map<String, String> args;
        final Path stateFile;
        final AtomicBoolean running = new AtomicBoolean(true);
        final List<String> errors = new ArrayList<>();
        Set<TopicPartition> assigned = new HashSet<>();
        int generations;
        int revocations;
        int lost;
        long consumed;
        long commits;
        String fatal;
        boolean closed;
        String memberId = "";
        final Map<TopicPartition, Long> positions = new HashMap<>();

        Member(Map<String, String> args) {
            this.args = args;
            this.stateFile = Path.of(args.get("state"));
        }

        void run() throws Exception {
            Properties p = consumerProps(args);
            boolean commit = Boolean.parseBoolean(args.getOrDefault("commit", "true"));
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
            Thread main = Thread.currentThread();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                running.set(false);
                consumer.wakeup();
                try {
                    main.join(30_000);
                } catch (InterruptedException ignored) {
                    // exiting anyway
                }
            }));
            save();
            if (args.containsKey("pattern")) {
                // Matched by the client against the topics in Metadata.
                consumer.subscribe(java.util.regex.Pattern.compile(args.get("pattern")), this);
            } else if (args.containsKey("re2")) {
                // Sent to the coordinator, which resolves it (KIP-848).
                consumer.subscribe(new org.apache.kafka.clients.consumer.SubscriptionPattern(args.get("re2")), this);
            } else {
                consumer.subscribe(List.of(args.get("topic").split(",")), this);
            }
            try {
                while (running.get()) {
                    try {
                        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            consumed++;
                            positions.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                        }
                        if (commit && !records.isEmpty()) {
                            consumer.commitSync();
                            commits++;
                        }
                        assigned = new HashSet<>(consumer.assignment());
                        memberId = consumer.groupMetadata().memberId();
                        save();
                    } catch (WakeupException e) {
                        break;
                    } catch (org.apache.kafka.common.errors.FencedInstanceIdException
                            | org.apache.kafka.common.errors.UnreleasedInstanceIdException
                            | org.apache.kafka.common.errors.GroupAuthorizationException e) {
                        fatal = e.getClass().getSimpleName();
                        error(e);
                        save();
                        System.exit(1);
                    } catch (RuntimeException e) {
                        error(e);
                        save();
                    }
                }
            } finally {
                try {
                    consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(20)));
                    closed = true;
                } catch (RuntimeException e) {
                    error(e);
                }
                save();
            }
        }

        void error(Throwable e) {
            errors.add(e.getClass().getSimpleName() + ": " + e.getMessage());
            if (errors.size() > 20) {
                errors.remove(0);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                revocations++;
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            generations++;
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            lost++;
        }

        void save() {
            Json j = new Json().obj();
            j.key("pid").num(ProcessHandle.current().pid());
            j.key("member_id").str(memberId);
            j.key("assigned").raw(partitions(assigned));
            j.key("generations").num(generations);
            j.key("revocations").num(revocations);
            j.key("lost").num(lost);
            j.key("consumed").num(consumed);
            j.key("commits").num(commits);
            j.key("positions").obj();
            positions.forEach((tp, o) -> j.key(tp.topic() + ":" + tp.partition()).num(o));
            j.end();
            j.key("errors").arr();
            errors.forEach(j::str);
            j.end();
            if (fatal != null) {
                j.key("fatal").str(fatal);
            }
            if (closed) {
                j.key("closed").bool(true);
            }
            j.end();
            try {
                Path tmp = Path.of(stateFile + ".tmp");
                Files.writeString(tmp, j.toString());
                Files.move(tmp, stateFile, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }
    }

    // ---- produce ---------------------------------------------------------

    static String produce(Map<String, String> args) throws Exception {
        Properties p = props(args);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", "all");
        String topic = args.get("topic");
        int count = Integer.parseInt(args.getOrDefault("count", "1"));
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "1"));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                byte[] value = ("java-" + i).getBytes(StandardCharsets.UTF_8);
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, value)));
            }
            for (var f : sent) {
                f.get(60, TimeUnit.SECONDS);
            }
        }
        return new Json().obj().key("produced").num(count).end().toString();
    }

    // ---- transform -------------------------------------------------------

    /** Copies `count` records from `topic` to `out`, partition for
     *  partition, one transaction per polled batch, with the consumed
     *  offsets committed in the transaction. */
    static String transform(Map<String, String> args) throws Exception {
        Properties c = consumerProps(args);
        c.put("isolation.level", "read_committed");
        Properties p = props(args);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("transactional.id", args.get("txn"));
        int count = Integer.parseInt(args.get("count"));
        long deadline = System.currentTimeMillis() + 90_000;
        long processed = 0;
        int transactions = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(args.get("topic")));
            while (processed < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(args.get("out"), r.partition(), r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    processed++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
            }
        }
        return new Json().obj().key("processed").num(processed).key("transactions").num(transactions).end().toString();
    }

    // ---- admin -----------------------------------------------------------

    static String admin(Map<String, String> args) throws Exception {
        Properties p = props(args);
        p.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(p)) {
            Json j = new Json().obj();
            String group = args.get("group");
            switch (args.get("op")) {
                case "list-groups" -> {
                    ListGroupsOptions o = new ListGroupsOptions();
                    if (args.containsKey("states")) {
                        Set<GroupState> states = new HashSet<>();
                        for (String s : args.get("states").split(",")) {
                            states.add(GroupState.parse(s));
                        }
                        o = o.inGroupStates(states);
                    }
                    if (args.containsKey("types")) {
                        Set<GroupType> types = new HashSet<>();
                        for (String s : args.get("types").split(",")) {
                            types.add(GroupType.parse(s));
                        }
                        o = o.withTypes(types);
                    }
                    Collection<GroupListing> all = admin.listGroups(o).all().get();
                    j.key("groups").obj();
                    for (GroupListing g : all) {
                        j.key(g.groupId()).obj()
                            .key("type").str(g.type().map(GroupType::toString).orElse(null))
                            .key("state").str(g.groupState().map(GroupState::toString).orElse(null))
                            .key("protocol").str(g.protocol())
                            .end();
                    }
                    j.end();
                }
                case "describe-groups" -> {
                    var futures = admin.describeConsumerGroups(List.of(args.get("groups").split(","))).describedGroups();
                    j.key("groups").obj();
                    for (var e : futures.entrySet()) {
                        j.key(e.getKey());
                        try {
                            describe(j, e.getValue().get());
                        } catch (ExecutionException x) {
                            j.obj().key("error").str(x.getCause().getClass().getSimpleName()).end();
                        }
                    }
                    j.end();
                }
                case "offsets" -> {
                    Map<TopicPartition, OffsetAndMetadata> offsets =
                        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                    j.key("offsets").obj();
                    for (var e : new java.util.TreeMap<String, Map.Entry<TopicPartition, OffsetAndMetadata>>(
                            byName(offsets)).values()) {
                        OffsetAndMetadata om = e.getValue();
                        j.key(e.getKey().topic() + ":" + e.getKey().partition()).obj()
                            .key("offset").num(om == null ? -1 : om.offset())
                            .key("metadata").str(om == null ? null : om.metadata())
                            .key("leader_epoch").num(om == null ? -1 : om.leaderEpoch().orElse(-1))
                            .end();
                    }
                    j.end();
                }
                case "alter-offsets" -> {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (String s : args.get("offsets").split(",")) {
                        String[] kv = s.split("=");
                        offsets.put(partition(kv[0]), new OffsetAndMetadata(Long.parseLong(kv[1]), "altered"));
                    }
                    j.key("result").str(outcome(admin.alterConsumerGroupOffsets(group, offsets).all()));
                }
                case "delete-offsets" -> {
                    Set<TopicPartition> tps = new HashSet<>();
                    for (String s : args.get("partitions").split(",")) {
                        tps.add(partition(s));
                    }
                    j.key("result").str(outcome(admin.deleteConsumerGroupOffsets(group, tps).all()));
                }
                case "delete-groups" -> {
                    var futures = admin.deleteConsumerGroups(List.of(args.get("groups").split(","))).deletedGroups();
                    j.key("groups").obj();
                    for (var e : futures.entrySet()) {
                        j.key(e.getKey()).str(outcome(e.getValue()));
                    }
                    j.end();
                }
                case "remove-members" -> {
                    RemoveMembersFromConsumerGroupOptions o;
                    if (args.containsKey("instances")) {
                        List<MemberToRemove> members = new ArrayList<>();
                        for (String s : args.get("instances").split(",")) {
                            members.add(new MemberToRemove(s));
                        }
                        o = new RemoveMembersFromConsumerGroupOptions(members);
                    } else {
                        o = new RemoveMembersFromConsumerGroupOptions();
                    }
                    j.key("result").str(outcome(admin.removeMembersFromConsumerGroup(group, o).all()));
                }
                case "create-token" -> {
                    CreateDelegationTokenOptions o = new CreateDelegationTokenOptions();
                    if (args.containsKey("renewers")) {
                        List<KafkaPrincipal> renewers = new ArrayList<>();
                        for (String r : args.get("renewers").split(",")) {
                            renewers.add(SecurityUtils.parseKafkaPrincipal(r));
                        }
                        o = o.renewers(renewers);
                    }
                    if (args.containsKey("owner")) {
                        o = o.owner(SecurityUtils.parseKafkaPrincipal(args.get("owner")));
                    }
                    try {
                        DelegationToken t = admin.createDelegationToken(o).delegationToken().get();
                        j.key("token_id").str(t.tokenInfo().tokenId())
                            .key("hmac").str(t.hmacAsBase64String())
                            .key("owner").str(t.tokenInfo().owner().toString())
                            .key("requester").str(t.tokenInfo().tokenRequester().toString())
                            .key("issued").num(t.tokenInfo().issueTimestamp())
                            .key("expiry").num(t.tokenInfo().expiryTimestamp())
                            .key("max").num(t.tokenInfo().maxTimestamp());
                    } catch (ExecutionException x) {
                        j.key("error").str(x.getCause().getClass().getSimpleName());
                    }
                }
                case "describe-tokens" -> {
                    List<DelegationToken> all = admin.describeDelegationToken().delegationTokens().get();
                    j.key("tokens").obj();
                    for (DelegationToken t : all) {
                        List<String> renewers = new ArrayList<>();
                        t.tokenInfo().renewers().forEach(r -> renewers.add(r.toString()));
                        j.key(t.tokenInfo().tokenId()).obj()
                            .key("owner").str(t.tokenInfo().owner().toString())
                            .key("renewers").str(String.join(",", renewers))
                            .key("hmac").str(t.hmacAsBase64String())
                            .end();
                    }
                    j.end();
                }
                case "renew-token", "expire-token" -> {
                    byte[] hmac = Base64.getDecoder().decode(args.get("hmac"));
                    long period = Long.parseLong(args.getOrDefault("period", "-1"));
                    KafkaFuture<Long> expiry = args.get("op").equals("renew-token")
                        ? admin.renewDelegationToken(hmac, new RenewDelegationTokenOptions().renewTimePeriodMs(period))
                            .expiryTimestamp()
                        : admin.expireDelegationToken(hmac, new ExpireDelegationTokenOptions().expiryTimePeriodMs(period))
                            .expiryTimestamp();
                    try {
                        j.key("expiry").num(expiry.get());
                    } catch (ExecutionException x) {
                        j.key("error").str(x.getCause().getClass().getSimpleName());
                    }
                }
                default -> throw new IllegalArgumentException("op " + args.get("op"));
            }
            return j.end().toString();
        }
    }

    static void describe(Json j, ConsumerGroupDescription g) {
        j.obj()
            .key("state").str(g.groupState().toString())
            .key("type").str(g.type().toString())
            .key("simple").bool(g.isSimpleConsumerGroup())
            .key("assignor").str(g.partitionAssignor())
            .key("coordinator").num(g.coordinator() == null ? -1 : g.coordinator().id())
            .key("group_epoch").num(g.groupEpoch().orElse(-1))
            .key("members").arr();
        for (MemberDescription m : g.members()) {
            j.obj()
                .key("member_id").str(m.consumerId())
                .key("client_id").str(m.clientId())
                .key("host").str(m.host())
                .key("instance_id").str(m.groupInstanceId().orElse(null))
                .key("assignment").raw(partitions(m.assignment().topicPartitions()))
                .end();
        }
        j.end().end();
    }

    static Map<String, Map.Entry<TopicPartition, OffsetAndMetadata>> byName(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, Map.Entry<TopicPartition, OffsetAndMetadata>> out = new LinkedHashMap<>();
        m.entrySet().forEach(e -> out.put(String.format("%s:%06d", e.getKey().topic(), e.getKey().partition()), e));
        return out;
    }

    /** "ok", or the simple name of the exception the call failed with. */
    static String outcome(KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }

    static TopicPartition partition(String s) {
        int colon = s.lastIndexOf(':');
        return new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
    }

    /** [[topic, partition], ...] sorted, as the Python workers write it. */
    static String partitions(Collection<TopicPartition> tps) {
        TreeSet<String> sorted = new TreeSet<>();
        Json j = new Json().arr();
        List<TopicPartition> list = new ArrayList<>(tps);
        list.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                                                         : a.topic().compareTo(b.topic()));
        for (TopicPartition tp : list) {
            if (sorted.add(tp.toString())) {
                j.arr().str(tp.topic()).num(tp.partition()).end();
            }
        }
        return j.end().toString();
    }

    /** A small JSON writer: enough for strings, numbers, booleans, nesting. */
    static final class Json {
        private final StringBuilder out = new StringBuilder();
        private final java.util.ArrayDeque<Boolean> first = new java.util.ArrayDeque<>();
        private final java.util.ArrayDeque<Character> closers = new java.util.ArrayDeque<>();
        private boolean afterKey;

        private void sep() {
            if (afterKey) {
                afterKey = false;
                return;
            }
            if (!first.isEmpty()) {
                if (!first.pop()) {
                    out.append(',');
                }
                first.push(false);
            }
        }

        Json obj() {
            sep();
            out.append('{');
            first.push(true);
            closers.push('}');
            return this;
        }

        Json arr() {
            sep();
            out.append('[');
            first.push(true);
            closers.push(']');
            return this;
        }

        Json end() {
            first.pop();
            out.append(closers.pop());
            return this;
        }

        Json key(String k) {
            str(k);
            out.append(':');
            afterKey = true;
            return this;
        }

        Json str(String s) {
            sep();
            if (s == null) {
                out.append("null");
                return this;
            }
            out.append('"');
            for (char c : s.toCharArray()) {
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
            return this;
        }

        Json num(long n) {
            sep();
            out.append(n);
            return this;
        }

        Json bool(boolean b) {
            sep();
            out.append(b);
            return this;
        }

        Json raw(String json) {
            sep();
            out.append(json);
            return this;
        }

        @Override
        public String toString() {
            return out.toString();
        }
    }
}
