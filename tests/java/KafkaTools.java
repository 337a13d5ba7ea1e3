// The Java admin and producer calls Kafka's own tools make (kafka-topics.sh and friends),
// as a reference client for kafkarepl's integration tests. One line of output per command.
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaTools {
    static org.apache.kafka.common.config.ConfigResource resource(
            org.apache.kafka.common.config.ConfigResource.Type type, String name) {
        return new org.apache.kafka.common.config.ConfigResource(type, name);
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return Admin.create(p);
    }

    // An admin client with client settings from a properties file (SASL logins and such).
    static Admin adminWith(String bootstrap, String propertiesFile) throws java.io.IOException {
        Properties p = new Properties();
        try (java.io.FileReader r = new java.io.FileReader(propertiesFile)) {
            p.load(r);
        }
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        return Admin.create(p);
    }

    static String failure(ExecutionException e) {
        return e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
    }

    // A string producer's settings: the bootstrap, String serializers, then KEY, VALUE pairs.
    static Properties producerProps(String bootstrap, String... settings) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (int i = 0; i + 1 < settings.length; i += 2) p.put(settings[i], settings[i + 1]);
        return p;
    }

    /** Set once stdin closes: how a test tells a long-running command to finish. */
    static java.util.concurrent.atomic.AtomicBoolean stopAtEndOfStdin() {
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (java.io.IOException e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        return stop;
    }

    public static void main(String[] args) throws Exception {
        String cmd = args[0], bootstrap = args[1];
        switch (cmd) {
            case "create-topic": {  // kafka-topics.sh --create: NAME PARTITIONS RF [k=v]...
                try (Admin a = admin(bootstrap)) {
                    NewTopic t = new NewTopic(args[2], Integer.parseInt(args[3]), Short.parseShort(args[4]));
                    Map<String, String> cfg = new HashMap<>();
                    for (int i = 5; i < args.length; i++) {
                        String[] kv = args[i].split("=", 2);
                        cfg.put(kv[0], kv[1]);
                    }
                    t.configs(cfg);
                    CreateTopicsResult r = a.createTopics(List.of(t));
                    r.all().get();
                    Config c = r.config(args[2]).get();
                    System.out.println("created partitions=" + r.numPartitions(args[2]).get()
                        + " rf=" + r.replicationFactor(args[2]).get() + " configs=" + c.entries().size()
                        + " retention.ms=" + c.get("retention.ms").value());
                }
                break;
            }
            case "describe-topic": {  // kafka-topics.sh --describe: NAME
                try (Admin a = admin(bootstrap)) {
                    TopicDescription d = a.describeTopics(List.of(args[2])).allTopicNames().get().get(args[2]);
                    System.out.println("partitions=" + d.partitions().size() + " isr0=" + d.partitions().get(0).isr().size());
                }
                break;
            }
            case "describe-topic-id": {  // kafka-topics.sh --describe --topic-id: NAME (its id found by name
                // first), then the same id once deleted
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.Uuid id = a.describeTopics(List.of(args[2])).allTopicNames().get()
                        .get(args[2]).topicId();
                    TopicDescription d = a.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id)))
                        .allTopicIds().get().get(id);
                    String out = "name=" + d.name() + " partitions=" + d.partitions().size() + " same_id=" + id.equals(d.topicId());
                    a.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id))).all().get();
                    try {
                        a.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(id))).allTopicIds().get();
                        out += " after_delete=found";
                    } catch (ExecutionException e) {
                        out += " after_delete=" + e.getCause().getClass().getSimpleName();
                    }
                    System.out.println(out);
                }
                break;
            }
            case "max-timestamp": {  // kafka-get-offsets.sh --time -3 (KIP-734): TOPIC PARTITION
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.TopicPartition tp =
                        new org.apache.kafka.common.TopicPartition(args[2], Integer.parseInt(args[3]));
                    ListOffsetsResult.ListOffsetsResultInfo i =
                        a.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
                    System.out.println("offset=" + i.offset() + " timestamp=" + i.timestamp());
                }
                break;
            }
            case "authorized-ops": {  // KIP-430 as kafka-topics/kafka-consumer-groups show them: TOPIC GROUP
                try (Admin a = admin(bootstrap)) {
                    Set<?> cluster = a.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true))
                        .authorizedOperations().get();
                    Set<?> topic = a.describeTopics(List.of(args[2]), new DescribeTopicsOptions().includeAuthorizedOperations(true))
                        .allTopicNames().get().get(args[2]).authorizedOperations();
                    Set<?> group = a.describeConsumerGroups(List.of(args[3]),
                        new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                        .all().get().get(args[3]).authorizedOperations();
                    Set<?> none = a.describeCluster().authorizedOperations().get();
                    System.out.println("cluster=" + new TreeSet<>(cluster.stream().map(Object::toString).toList())
                        + " topic=" + new TreeSet<>(topic.stream().map(Object::toString).toList())
                        + " group=" + new TreeSet<>(group.stream().map(Object::toString).toList())
                        + " unasked=" + none);
                }
                break;
            }
            case "synonyms": {  // kafka-configs.sh --describe --all (includeSynonyms): TOPIC KEY BROKER KEY
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.config.ConfigResource t = resource(org.apache.kafka.common.config.ConfigResource.Type.TOPIC, args[2]);
                    org.apache.kafka.common.config.ConfigResource b = resource(org.apache.kafka.common.config.ConfigResource.Type.BROKER, args[4]);
                    Map<org.apache.kafka.common.config.ConfigResource, Config> cs =
                        a.describeConfigs(List.of(t, b), new DescribeConfigsOptions().includeSynonyms(true)).all().get();
                    StringBuilder out = new StringBuilder();
                    for (String[] q : new String[][]{{"topic", args[3]}, {"broker", args[5]}}) {
                        ConfigEntry e = cs.get(q[0].equals("topic") ? t : b).get(q[1]);
                        if (e == null) {  // not listed at all
                            out.append(q[1]).append("=absent ");
                            continue;
                        }
                        out.append(q[1]).append("=").append(e.value()).append(":").append(e.source()).append(" [");
                        for (ConfigEntry.ConfigSynonym syn : e.synonyms())
                            out.append(syn.name()).append("=").append(syn.value()).append(":").append(syn.source()).append(";");
                        out.append("] ");
                    }
                    System.out.println(out.toString().trim());
                }
                break;
            }
            case "config-types": {  // ConfigEntry.type() as UIs read it: TOPIC BROKER KEY...
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.config.ConfigResource t = resource(org.apache.kafka.common.config.ConfigResource.Type.TOPIC, args[2]);
                    org.apache.kafka.common.config.ConfigResource b = resource(org.apache.kafka.common.config.ConfigResource.Type.BROKER, args[3]);
                    Map<org.apache.kafka.common.config.ConfigResource, Config> cs = a.describeConfigs(List.of(t, b)).all().get();
                    List<String> out = new ArrayList<>();
                    for (int i = 4; i < args.length; i++) {
                        ConfigEntry e = cs.get(t).get(args[i]);
                        if (e == null) e = cs.get(b).get(args[i]);
                        out.add(args[i] + "=" + (e == null ? "missing" : e.type()));
                    }
                    System.out.println(String.join(" ", out));
                }
                break;
            }
            case "config-docs": {  // ConfigEntry.documentation() with and without includeDocumentation: TOPIC BROKER KEY...
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.config.ConfigResource t = resource(org.apache.kafka.common.config.ConfigResource.Type.TOPIC, args[2]);
                    org.apache.kafka.common.config.ConfigResource b = resource(org.apache.kafka.common.config.ConfigResource.Type.BROKER, args[3]);
                    Map<org.apache.kafka.common.config.ConfigResource, Config> with = a.describeConfigs(List.of(t, b),
                        new DescribeConfigsOptions().includeDocumentation(true)).all().get();
                    Map<org.apache.kafka.common.config.ConfigResource, Config> without = a.describeConfigs(List.of(t, b)).all().get();
                    List<String> out = new ArrayList<>();  // one line: entries apart by \u001f, fields by tabs
                    for (int i = 4; i < args.length; i++) {
                        org.apache.kafka.common.config.ConfigResource r = with.get(t).get(args[i]) != null ? t : b;
                        ConfigEntry e = with.get(r).get(args[i]);
                        ConfigEntry plain = without.get(r).get(args[i]);
                        out.add(args[i] + "\t" + (e == null ? "missing" : e.documentation()) + "\t"
                            + (plain == null ? "missing" : plain.documentation()));
                    }
                    System.out.println(String.join("\u001f", out));
                }
                break;
            }
            case "describe-acls": {  // kafka-acls.sh --list
                try (Admin a = admin(bootstrap)) {
                    a.describeAcls(org.apache.kafka.common.acl.AclBindingFilter.ANY).values().get();
                    System.out.println("listed");
                } catch (ExecutionException e) {
                    System.out.println("failed " + e.getCause().getClass().getSimpleName());
                }
                break;
            }
            case "list-groups": {  // kafka-groups.sh --list (ListGroups v5)
                try (Admin a = admin(bootstrap)) {
                    List<String> out = new ArrayList<>();
                    for (GroupListing g : a.listGroups().all().get()) {
                        out.add(g.groupId() + ":" + g.type().map(Object::toString).orElse("?") + ":" + g.protocol()
                            + ":" + g.groupState().map(Object::toString).orElse("?"));
                    }
                    Collections.sort(out);
                    System.out.println("groups=" + out);
                }
                break;
            }
            case "group-offsets": {  // kafka-consumer-groups.sh --describe --all-groups' offsets, one batched call: GID...
                try (Admin a = admin(bootstrap)) {
                    Map<String, ListConsumerGroupOffsetsSpec> specs = new TreeMap<>();
                    for (int i = 2; i < args.length; i++) specs.put(args[i], new ListConsumerGroupOffsetsSpec());
                    ListConsumerGroupOffsetsResult r = a.listConsumerGroupOffsets(specs);
                    List<String> groups = new ArrayList<>();
                    for (String g : specs.keySet()) {
                        List<String> out = new ArrayList<>();
                        r.partitionsToOffsetAndMetadata(g).get().forEach((tp, o) ->
                            out.add(tp.topic() + "-" + tp.partition() + "=" + (o == null ? "none" : o.offset())));
                        Collections.sort(out);
                        groups.add(g + " " + out);
                    }
                    System.out.println(String.join(" | ", groups));
                }
                break;
            }
            case "delete-group": {  // kafka-consumer-groups.sh --delete --group GID
                try (Admin a = admin(bootstrap)) {
                    a.deleteConsumerGroups(List.of(args[2])).all().get();
                    System.out.println("deleted");
                } catch (ExecutionException e) {
                    System.out.println("failed " + e.getCause().getClass().getSimpleName());
                }
                break;
            }
            case "delete-offsets": {  // kafka-consumer-groups.sh --delete-offsets: GID TOPIC PARTITION
                try (Admin a = admin(bootstrap)) {
                    a.deleteConsumerGroupOffsets(args[2], Set.of(
                        new org.apache.kafka.common.TopicPartition(args[3], Integer.parseInt(args[4])))).all().get();
                    System.out.println("deleted");
                } catch (ExecutionException e) {
                    System.out.println("failed " + e.getCause().getClass().getSimpleName());
                }
                break;
            }
            case "delete-records": {  // kafka-delete-records.sh: TOPIC PARTITION OFFSET
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.TopicPartition tp =
                        new org.apache.kafka.common.TopicPartition(args[2], Integer.parseInt(args[3]));
                    DeletedRecords d = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(Long.parseLong(args[4]))))
                        .lowWatermarks().get(tp).get();
                    System.out.println("low_watermark=" + d.lowWatermark());
                } catch (ExecutionException e) {
                    System.out.println("failed " + e.getCause().getClass().getSimpleName());
                }
                break;
            }
            case "log-dirs": {  // kafka-log-dirs.sh --describe: BROKER_ID
                try (Admin a = admin(bootstrap)) {
                    int broker = Integer.parseInt(args[2]);
                    Map<String, LogDirDescription> dirs = a.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
                    List<String> out = new ArrayList<>();
                    for (LogDirDescription d : dirs.values()) {
                        d.replicaInfos().forEach((tp, info) -> out.add(tp + ":" + (info.size() > 0) + ":" + info.offsetLag()));
                        out.add("usable=" + (d.usableBytes().orElse(-1L) > 0));
                    }
                    Collections.sort(out);
                    System.out.println("dirs=" + dirs.size() + " " + out);
                }
                break;
            }
            case "move-log-dir": {  // Admin.alterReplicaLogDirs as kafka-reassign-partitions.sh with log_dirs: TOPIC PARTITION BROKER DIR
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.TopicPartitionReplica r =
                        new org.apache.kafka.common.TopicPartitionReplica(args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
                    String dir = args[5];
                    String bad;  // a path that is no log dir of the broker
                    try {
                        a.alterReplicaLogDirs(Map.of(r, dir + "-not-a-log-dir")).all().get();
                        bad = "accepted";
                    } catch (ExecutionException e) {
                        bad = e.getCause().getClass().getSimpleName();
                    }
                    String slash;  // the log dir with a trailing slash: Kafka compares the path as sent
                    try {
                        a.alterReplicaLogDirs(Map.of(r, dir + "/")).all().get();
                        slash = "accepted";
                    } catch (ExecutionException e) {
                        slash = e.getCause().getClass().getSimpleName();
                    }
                    a.alterReplicaLogDirs(Map.of(r, dir)).all().get();
                    // What kafka-reassign-partitions.sh --verify polls: until the replica is in
                    // the destination and has no future log.
                    DescribeReplicaLogDirsResult.ReplicaLogDirInfo info;
                    long deadline = System.currentTimeMillis() + 60000;
                    while (true) {
                        info = a.describeReplicaLogDirs(List.of(r)).all().get().get(r);
                        if (dir.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) break;
                        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("not moved: " + info);
                        Thread.sleep(100);
                    }
                    org.apache.kafka.common.TopicPartition tp = new org.apache.kafka.common.TopicPartition(r.topic(), r.partition());
                    List<String> where = new ArrayList<>();  // kafka-log-dirs.sh --describe: the dirs holding it
                    a.describeLogDirs(List.of(r.brokerId())).allDescriptions().get().get(r.brokerId()).forEach((d, desc) -> {
                        ReplicaInfo ri = desc.replicaInfos().get(tp);
                        if (ri != null) where.add(d + (ri.isFuture() ? ":future" : "") + ":" + (ri.size() > 0));
                    });
                    Collections.sort(where);
                    System.out.println("bad=" + bad + " slash=" + slash + " current=" + info.getCurrentReplicaLogDir()
                        + " future=" + info.getFutureReplicaLogDir() + " lag=" + info.getCurrentReplicaOffsetLag()
                        + " logDirs=" + where);
                }
                break;
            }
            case "connect-topics": {  // what a Connect distributed worker does at start-up: PREFIX RF
                Map<String, Object> props = new HashMap<>();
                props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                short rf = Short.parseShort(args[3]);
                try (org.apache.kafka.connect.util.TopicAdmin ta = new org.apache.kafka.connect.util.TopicAdmin(props)) {
                    List<String> made = new ArrayList<>();
                    for (String kind : List.of("offsets", "configs", "status")) {
                        NewTopic t = org.apache.kafka.connect.util.TopicAdmin.defineTopic(args[2] + "-" + kind)
                            .compacted().partitions(kind.equals("configs") ? 1 : 5).replicationFactor(rf).build();
                        made.addAll(ta.createOrFindTopics(t).createdTopics());
                        ta.verifyTopicCleanupPolicyOnlyCompact(args[2] + "-" + kind, "worker." + kind, "connector " + kind);
                    }
                    Collections.sort(made);
                    System.out.println("created=" + made);
                }
                break;
            }
            case "broker-throttle": {  // kafka-reassign-partitions.sh sets, --verify clears: BROKER_ID RATE|-
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.config.ConfigResource r = resource(org.apache.kafka.common.config.ConfigResource.Type.BROKER, args[2]);
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (String k : List.of("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                            "replica.alter.log.dirs.io.max.bytes.per.second")) {
                        ops.add(args[3].equals("-")
                            ? new AlterConfigOp(new ConfigEntry(k, ""), AlterConfigOp.OpType.DELETE)
                            : new AlterConfigOp(new ConfigEntry(k, args[3]), AlterConfigOp.OpType.SET));
                    }
                    a.incrementalAlterConfigs(Map.of(r, ops)).all().get();
                    Config c = a.describeConfigs(List.of(r)).all().get().get(r);
                    ConfigEntry e = c.get("leader.replication.throttled.rate");
                    System.out.println("rate=" + (e == null ? "none" : e.value() + ":" + e.source()));
                }
                break;
            }
            case "client-quotas": {  // kafka-configs.sh --alter/--describe --entity-type users/clients
                try (Admin a = admin(bootstrap)) {
                    var aliceApp = new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of("user", "alice", "client-id", "app"));
                    Map<String, String> dflt = new HashMap<>();
                    dflt.put("client-id", null);
                    var defaultClient = new org.apache.kafka.common.quota.ClientQuotaEntity(dflt);
                    var bad = new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of("client-id", "bad"));
                    var r = a.alterClientQuotas(List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration(aliceApp, List.of(
                            new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                            new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("request_percentage", 12.5))),
                        new org.apache.kafka.common.quota.ClientQuotaAlteration(defaultClient, List.of(
                            new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))),
                        new org.apache.kafka.common.quota.ClientQuotaAlteration(bad, List.of(
                            new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("producer_byte_rate", 10.5)))));
                    r.values().get(aliceApp).get();
                    r.values().get(defaultClient).get();
                    String badResult = "accepted";
                    try {
                        r.values().get(bad).get();
                    } catch (ExecutionException e) {
                        badResult = e.getCause().getClass().getSimpleName();
                    }
                    a.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(aliceApp, List.of(
                        new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("request_percentage", null))))).all().get();
                    var all = a.describeClientQuotas(org.apache.kafka.common.quota.ClientQuotaFilter.all()).entities().get();
                    var alice = a.describeClientQuotas(org.apache.kafka.common.quota.ClientQuotaFilter.contains(List.of(
                        org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity("user", "alice")))).entities().get();
                    var defaults = a.describeClientQuotas(org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(List.of(
                        org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofDefaultEntity("client-id")))).entities().get();
                    List<String> rows = new ArrayList<>();
                    for (var e : all.entrySet()) {
                        List<String> names = new ArrayList<>();
                        e.getKey().entries().forEach((k, v) -> names.add(k + "=" + (v == null ? "<default>" : v)));
                        Collections.sort(names);
                        rows.add(String.join(",", names) + ":" + new TreeMap<>(e.getValue()));
                    }
                    Collections.sort(rows);
                    System.out.println("bad=" + badResult + " alice=" + alice.size() + " defaults=" + defaults.size()
                        + " all=" + String.join(";", rows));
                }
                break;
            }
            case "describe-producers": {  // kafka-transactions.sh describe-producers: TOPIC PARTITION
                try (Admin a = admin(bootstrap)) {
                    org.apache.kafka.common.TopicPartition tp =
                        new org.apache.kafka.common.TopicPartition(args[2], Integer.parseInt(args[3]));
                    List<String> out = new ArrayList<>();
                    for (ProducerState s : a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                        out.add("epoch=" + s.producerEpoch() + ",last_seq=" + s.lastSequence()
                            + ",ts=" + (s.lastTimestamp() > 0) + ",txn=" + s.currentTransactionStartOffset().isPresent());
                    }
                    System.out.println("producers=" + out);
                }
                break;
            }
            case "mutation-quota": {  // kafka-topics.sh --create under controller_mutation_rate: PREFIX
                Properties p = new Properties();
                p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(AdminClientConfig.CLIENT_ID_CONFIG, "mutator");
                p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
                try (Admin a = Admin.create(p)) {
                    List<String> out = new ArrayList<>();
                    var noRetry = new CreateTopicsOptions().retryOnQuotaViolation(false);
                    var r = a.createTopics(List.of(new NewTopic(args[2] + "-a", 3, (short) 1),
                                                   new NewTopic(args[2] + "-b", 3, (short) 1),
                                                   new NewTopic(args[2] + "-c", 3, (short) 1)), noRetry);
                    for (String t : List.of("a", "b", "c")) {
                        try {
                            r.values().get(args[2] + "-" + t).get();
                            out.add(t + "=ok");
                        } catch (ExecutionException e) {
                            String extra = e.getCause() instanceof org.apache.kafka.common.errors.ThrottlingQuotaExceededException q
                                ? "(throttle>0=" + (q.throttleTimeMs() > 0) + ")" : "";
                            out.add(t + "=" + e.getCause().getClass().getSimpleName() + extra);
                        }
                    }
                    // the default: the admin client waits out the throttle and retries
                    long t0 = System.nanoTime();
                    a.createTopics(List.of(new NewTopic(args[2] + "-d", 3, (short) 1))).all().get();
                    out.add(String.format(Locale.ROOT, "retried=ok(%.1fs)", (System.nanoTime() - t0) / 1e9));
                    System.out.println(String.join(" ", out));
                }
                break;
            }
            case "quota-produce": {  // the Java producer under a quota: TOPIC CLIENT_ID RECORDS (10 KB each)
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ProducerConfig.CLIENT_ID_CONFIG, args[3]);
                p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
                p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                String value = "x".repeat(10_000);
                int n = Integer.parseInt(args[4]);
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
                    long start = System.nanoTime();
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = 0; i < n; i++) sent.add(prod.send(new ProducerRecord<>(args[2], 0, null, value)));
                    for (Future<RecordMetadata> f : sent) f.get();
                    double seconds = (System.nanoTime() - start) / 1e9;
                    double throttleMax = 0;
                    for (var e : prod.metrics().entrySet()) {
                        if (e.getKey().name().equals("produce-throttle-time-max")
                                && e.getKey().group().equals("producer-metrics")) {
                            throttleMax = Math.max(throttleMax, ((Number) e.getValue().metricValue()).doubleValue());
                        }
                    }
                    System.out.printf(Locale.ROOT, "acked=%d seconds=%.3f throttle_max=%.0f%n", sent.size(), seconds,
                                      throttleMax);
                }
                break;
            }
            case "transactions": {  // the Java transactional producer: TOPIC; commits 3, aborts 2, commits 1
                Properties p = producerProps(bootstrap, ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-tx",
                                             ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
                    prod.initTransactions();
                    int[][] plan = {{3, 1}, {2, 0}, {1, 1}};
                    int n = 0;
                    for (int[] step : plan) {
                        prod.beginTransaction();
                        for (int i = 0; i < step[0]; i++) {
                            prod.send(new ProducerRecord<>(args[2], "k", "java-" + (n++))).get();
                        }
                        if (step[1] == 1) prod.commitTransaction(); else prod.abortTransaction();
                    }
                    System.out.println("done");
                } catch (Exception e) {
                    System.out.println("failed " + e.getClass().getSimpleName() + ": " + e.getMessage());
                }
                break;
            }
            case "fence-producers": {  // kafka-transactions.sh force-terminate, Connect's exactly-once
                // source fencing (Admin.fenceProducers): TOPIC TXID. A producer opens a transaction
                // and writes 2 records, the admin fences its id, then the producer tries to commit.
                Properties p = producerProps(bootstrap, ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[3],
                                             ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p); Admin a = admin(bootstrap)) {
                    prod.initTransactions();
                    prod.beginTransaction();
                    for (int i = 0; i < 2; i++) prod.send(new ProducerRecord<>(args[2], "k", "fenced-" + i)).get();
                    FenceProducersResult r = a.fenceProducers(List.of(args[3]));
                    r.all().get();
                    String fenced = "fenced epoch=" + r.epochId(args[3]).get();
                    try {
                        prod.commitTransaction();
                        System.out.println(fenced + " commit=ok");
                    } catch (org.apache.kafka.common.KafkaException e) {
                        System.out.println(fenced + " commit=" + e.getClass().getSimpleName());
                    }
                }
                break;
            }
            case "abort-hanging": {  // kafka-transactions.sh abort --topic T --partition P --start-offset N:
                // TOPIC TXID. A producer leaves a transaction open (a hanging one, as after a lost
                // coordinator); the tool finds it with describeProducers and aborts it at the partition
                Properties p = producerProps(bootstrap, ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[3],
                                             ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000",
                                             ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "600000");
                KafkaProducer<String, String> prod = new KafkaProducer<>(p);
                prod.initTransactions();
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(args[2], 0, "k", "hanging")).get();
                org.apache.kafka.common.TopicPartition tp = new org.apache.kafka.common.TopicPartition(args[2], 0);
                try (Admin a = admin(bootstrap)) {
                    String out = "no open transaction";
                    for (ProducerState st : a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                        if (st.currentTransactionStartOffset().isEmpty()) continue;
                        a.abortTransaction(new AbortTransactionSpec(tp, st.producerId(), (short) st.producerEpoch(),
                                                                    st.coordinatorEpoch().orElse(0))).all().get();
                        out = "aborted start=" + st.currentTransactionStartOffset().getAsLong();
                    }
                    boolean open = false;
                    for (ProducerState st : a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                        open |= st.currentTransactionStartOffset().isPresent();
                    }
                    System.out.println(out + " open_after=" + open);
                }
                prod.close(java.time.Duration.ZERO);
                break;
            }
            case "describe-transactions": {  // kafka-transactions.sh list + describe: TRANSACTIONAL_ID
                try (Admin a = admin(bootstrap)) {
                    List<String> ids = new ArrayList<>();
                    for (TransactionListing l : a.listTransactions().all().get()) ids.add(l.transactionalId() + ":" + l.state());
                    Collections.sort(ids);
                    TransactionDescription d = a.describeTransactions(List.of(args[2])).description(args[2]).get();
                    System.out.println("list=" + ids + " state=" + d.state() + " epoch=" + d.producerEpoch()
                        + " timeout=" + d.transactionTimeoutMs());
                }
                break;
            }
            case "produce-with": {  // the Java producer with client settings from a file: TOPIC PROPERTIES_FILE
                // (SASL/OAUTHBEARER logins and such); "ok OFFSET" or "ExceptionClass: message"
                Properties p = producerProps(bootstrap, ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000",
                                             ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000",
                                             ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
                try (java.io.FileReader r = new java.io.FileReader(args[3])) {
                    p.load(r);
                }
                for (String k : p.stringPropertyNames()) {  // JVM settings some logins read (sys.<name>=...)
                    if (k.startsWith("sys.")) System.setProperty(k.substring(4), p.getProperty(k));
                }
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
                    System.out.println("ok " + prod.send(new ProducerRecord<>(args[2], "k", "v")).get().offset());
                } catch (ExecutionException e) {
                    System.out.println(e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                } catch (org.apache.kafka.common.KafkaException e) {
                    Throwable root = e;
                    while (root.getCause() != null) root = root.getCause();
                    System.out.println(e.getClass().getSimpleName() + ": " + e.getMessage() + " (" + root + ")");
                }
                break;
            }
            case "chaos-produce": {  // numbered values round-robin over partitions until stdin closes:
                // TOPIC PARTITIONS RATE; "ack P OFFSET VALUE" or "err P VALUE Exception" per record, "done"
                // once every record has its outcome (tests/integration/chaos.py's ChaosProducer)
                String topic = args[2];
                int parts = Integer.parseInt(args[3]);
                double rate = Double.parseDouble(args[4]);
                Properties p = producerProps(bootstrap, ProducerConfig.ACKS_CONFIG, "all",
                                             ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true",
                                             ProducerConfig.LINGER_MS_CONFIG, "5",
                                             // within the 90 s a test waits for the last outcomes
                                             ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000",
                                             ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000",
                                             ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000",
                                             ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100",
                                             ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
                java.util.concurrent.atomic.AtomicBoolean stop = stopAtEndOfStdin();
                java.io.PrintStream out = System.out;
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
                    long started = System.nanoTime();
                    for (long n = 0; !stop.get(); n++) {
                        String v = Long.toString(n);
                        int part = (int) (n % parts);
                        prod.send(new ProducerRecord<>(topic, part, null, v), (md, e) -> {
                            synchronized (out) {
                                if (e == null) out.println("ack " + md.partition() + " " + md.offset() + " " + v);
                                else out.println("err " + part + " " + v + " " + e);
                            }
                        });
                        long ahead = (long) ((n + 1) / rate * 1e9) - (System.nanoTime() - started);
                        if (ahead > 0) Thread.sleep(ahead / 1_000_000, (int) (ahead % 1_000_000));
                    }
                    prod.flush();
                }
                synchronized (out) {
                    out.println("done");
                    out.flush();
                }
                break;
            }
            case "txn-chaos": {  // transactions until stdin closes: TOPIC PARTITIONS TXID. Transaction t
                // writes "t-0".."t-4" round-robin over the partitions and commits, every fourth aborts;
                // prints "commit t" / "abort t" once that call returned, "unknown t EXC" when it failed
                // (the producer is then closed and a new one's initTransactions settles t), "done"
                String topic = args[2];
                int parts = Integer.parseInt(args[3]);
                Properties p = producerProps(bootstrap, ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[4],
                                             ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000",
                                             ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000",
                                             ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000",
                                             ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100",
                                             ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000",
                                             ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
                java.util.concurrent.atomic.AtomicBoolean stop = stopAtEndOfStdin();
                KafkaProducer<String, String> prod = null;
                for (long t = 0; !stop.get(); t++) {
                    try {
                        if (prod == null) {
                            prod = new KafkaProducer<>(p);
                            prod.initTransactions();
                        }
                        prod.beginTransaction();
                        List<Future<RecordMetadata>> sent = new ArrayList<>();
                        for (int i = 0; i < 5; i++) {
                            sent.add(prod.send(new ProducerRecord<>(topic, (int) ((t + i) % parts), null, t + "-" + i)));
                        }
                        for (Future<RecordMetadata> f : sent) f.get();
                        if (t % 4 == 3) {
                            prod.abortTransaction();
                            System.out.println("abort " + t);
                        } else {
                            prod.commitTransaction();
                            System.out.println("commit " + t);
                        }
                    } catch (Exception e) {
                        Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                        System.out.println("unknown " + t + " " + c.getClass().getSimpleName());
                        if (prod != null) {
                            try {
                                prod.close(java.time.Duration.ofSeconds(5));
                            } catch (Exception ignored) { }
                            prod = null;
                        }
                        Thread.sleep(200);
                    }
                    System.out.flush();
                }
                // The last transaction settled: a new producer's initTransactions completes or
                // aborts whatever the old one left.
                for (int attempt = 0; ; attempt++) {
                    try {
                        if (prod != null) prod.close(java.time.Duration.ofSeconds(5));
                        prod = new KafkaProducer<>(p);
                        prod.initTransactions();
                        prod.close(java.time.Duration.ofSeconds(5));
                        break;
                    } catch (Exception e) {
                        prod = null;
                        if (attempt >= 10) throw e;
                        Thread.sleep(1000);
                    }
                }
                System.out.println("done");
                System.out.flush();
                break;
            }
            case "produce-timestamps": {  // the Java producer, one batch of records with these timestamps: TOPIC TS...
                // each record's outcome, " | " between: "ok OFFSET" or "ExceptionClass: message"
                Properties p = producerProps(bootstrap, ProducerConfig.LINGER_MS_CONFIG, "200",
                                             ProducerConfig.RETRIES_CONFIG, "0");
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = 3; i < args.length; i++) {
                        sent.add(prod.send(new ProducerRecord<>(args[2], 0, Long.parseLong(args[i]), "k" + i, "v")));
                    }
                    List<String> out = new ArrayList<>();
                    for (Future<RecordMetadata> f : sent) {
                        try {
                            out.add("ok " + f.get().offset());
                        } catch (ExecutionException e) {
                            out.add(e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                        }
                    }
                    System.out.println(String.join(" | ", out));
                }
                break;
            }
            case "token": {  // kafka-delegation-tokens.sh: PROPERTIES_FILE OP ARGS (one line, or "Exception: message")
                // create MAX_LIFETIME_MS [OWNER|-] [RENEWER...] -> "TOKEN_ID HMAC_BASE64 OWNER REQUESTER ISSUE EXPIRY MAX"
                // renew|expire HMAC_BASE64 PERIOD_MS -> "expiry=MS"; describe [OWNER...] -> "tokens ID:OWNER:RENEWERS:HMAC ..."
                try (Admin a = adminWith(bootstrap, args[2])) {
                    String op = args[3];
                    if (op.equals("create")) {
                        var o = new CreateDelegationTokenOptions().maxlifeTimeMs(Long.parseLong(args[4]));
                        if (args.length > 5 && !args[5].equals("-"))
                            o.owner(org.apache.kafka.common.utils.SecurityUtils.parseKafkaPrincipal(args[5]));
                        List<org.apache.kafka.common.security.auth.KafkaPrincipal> renewers = new ArrayList<>();
                        for (int i = 6; i < args.length; i++)
                            renewers.add(org.apache.kafka.common.utils.SecurityUtils.parseKafkaPrincipal(args[i]));
                        o.renewers(renewers);
                        var t = a.createDelegationToken(o).delegationToken().get();
                        var i = t.tokenInfo();
                        System.out.println(i.tokenId() + " " + t.hmacAsBase64String() + " " + i.owner() + " "
                            + i.tokenRequester() + " " + i.issueTimestamp() + " " + i.expiryTimestamp() + " " + i.maxTimestamp());
                    } else if (op.equals("renew") || op.equals("expire")) {
                        byte[] hmac = Base64.getDecoder().decode(args[4]);
                        long period = Long.parseLong(args[5]);
                        long expiry = op.equals("renew")
                            ? a.renewDelegationToken(hmac, new RenewDelegationTokenOptions().renewTimePeriodMs(period)).expiryTimestamp().get()
                            : a.expireDelegationToken(hmac, new ExpireDelegationTokenOptions().expiryTimePeriodMs(period)).expiryTimestamp().get();
                        System.out.println("expiry=" + expiry);
                    } else if (op.equals("describe")) {
                        var o = new DescribeDelegationTokenOptions();
                        if (args.length > 4) {
                            List<org.apache.kafka.common.security.auth.KafkaPrincipal> owners = new ArrayList<>();
                            for (int i = 4; i < args.length; i++)
                                owners.add(org.apache.kafka.common.utils.SecurityUtils.parseKafkaPrincipal(args[i]));
                            o.owners(owners);
                        }
                        List<String> rows = new ArrayList<>();
                        for (var t : a.describeDelegationToken(o).delegationTokens().get()) {
                            List<String> rs = new ArrayList<>();
                            t.tokenInfo().renewers().forEach(r -> rs.add(r.toString()));
                            rows.add(t.tokenInfo().tokenId() + ":" + t.tokenInfo().owner() + ":" + String.join(",", rs)
                                     + ":" + t.hmacAsBase64String());
                        }
                        Collections.sort(rows);
                        System.out.println("tokens " + String.join(" ", rows));
                    } else {
                        throw new IllegalArgumentException(op);
                    }
                } catch (ExecutionException e) {
                    System.out.println(failure(e));
                }
                break;
            }
            case "read-all": {  // kafka-console-consumer.sh --from-beginning, partition 0: TOPIC [CLIENT_RACK]
                // one line "offset:key:value|null:timestamp" per record up to the end offset
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                if (args.length > 3)
                    p.put("client.rack", args[3]);  // KIP-392: the leader may send it to a follower
                p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
                p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
                p.put("enable.auto.commit", "false");
                try (org.apache.kafka.clients.consumer.KafkaConsumer<String, String> c =
                         new org.apache.kafka.clients.consumer.KafkaConsumer<>(p)) {
                    org.apache.kafka.common.TopicPartition tp = new org.apache.kafka.common.TopicPartition(args[2], 0);
                    c.assign(List.of(tp));
                    c.seekToBeginning(List.of(tp));
                    long end = c.endOffsets(List.of(tp)).get(tp);
                    StringBuilder out = new StringBuilder();
                    long deadline = System.currentTimeMillis() + 30000;
                    while (c.position(tp) < end && System.currentTimeMillis() < deadline) {
                        for (org.apache.kafka.clients.consumer.ConsumerRecord<String, String> r :
                                 c.poll(java.time.Duration.ofMillis(500))) {
                            out.append(r.offset()).append(':').append(r.key()).append(':')
                                .append(r.value() == null ? "null" : r.value()).append(':').append(r.timestamp()).append(' ');
                        }
                    }
                    System.out.println(out.toString().trim());
                }
                break;
            }
            case "group-member": {  // a subscribe() consumer: GROUP TOPIC MAX_SECONDS [ASSIGNOR [INSTANCE_ID]], driven by stdin
                // Polls until the line "stop" (or MAX_SECONDS), printing its rebalance
                // callbacks as they come ("assigned 0,1", "revoked ...", "lost ..."); then
                // "commit ok" (or the failure) for a commitSync of its positions and
                // "records N"; then waits for "close" and prints "closing" before close()
                // (which revokes). Two steps, so no member leaves while another still polls.
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", args[2]);
                p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
                p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
                p.put("enable.auto.commit", "false");
                p.put("auto.offset.reset", "earliest");
                String assignor = args.length > 5 ? args[5] : "";
                if (assignor.startsWith("consumer")) {
                    // KIP-848's protocol: the broker assigns ("consumer:range" names its assignor);
                    // the heartbeat interval and session timeout are the broker's
                    p.put("group.protocol", "consumer");
                    if (assignor.contains(":")) p.put("group.remote.assignor", assignor.split(":", 2)[1]);
                } else {
                    p.put("heartbeat.interval.ms", "500");
                    // RangeAssignor unless told: "cooperative-sticky" is KIP-429's incremental protocol
                    p.put("partition.assignment.strategy", assignor.equals("cooperative-sticky")
                          ? "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
                          : "org.apache.kafka.clients.consumer.RangeAssignor");
                }
                if (args.length > 6) p.put("group.instance.id", args[6]);  // a static member (KIP-345)
                BlockingQueue<String> commands = new LinkedBlockingQueue<>();
                Thread stdin = new Thread(() -> {
                    try (java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))) {
                        for (String line; (line = r.readLine()) != null; ) commands.add(line.trim());
                    } catch (java.io.IOException e) {
                        commands.add("close");
                    }
                });
                stdin.setDaemon(true);
                stdin.start();
                try (org.apache.kafka.clients.consumer.KafkaConsumer<String, String> c =
                         new org.apache.kafka.clients.consumer.KafkaConsumer<>(p)) {
                    c.subscribe(List.of(args[3]), new org.apache.kafka.clients.consumer.ConsumerRebalanceListener() {
                        void show(String what, Collection<org.apache.kafka.common.TopicPartition> ps) {
                            StringJoiner j = new StringJoiner(",");
                            ps.stream().map(org.apache.kafka.common.TopicPartition::partition).sorted()
                                .forEach(x -> j.add(String.valueOf(x)));
                            System.out.println(what + " " + j);
                            System.out.flush();
                        }
                        public void onPartitionsAssigned(Collection<org.apache.kafka.common.TopicPartition> ps) { show("assigned", ps); }
                        public void onPartitionsRevoked(Collection<org.apache.kafka.common.TopicPartition> ps) { show("revoked", ps); }
                        public void onPartitionsLost(Collection<org.apache.kafka.common.TopicPartition> ps) { show("lost", ps); }
                    });
                    long records = 0, deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args[4]);
                    while (System.currentTimeMillis() < deadline && !"stop".equals(commands.peek()))
                        records += c.poll(java.time.Duration.ofMillis(200)).count();
                    commands.poll();
                    try {
                        c.commitSync(java.time.Duration.ofSeconds(20));
                        System.out.println("commit ok");
                    } catch (Exception e) {
                        System.out.println("commit failed: " + e);
                    }
                    System.out.println("records " + records);
                    System.out.flush();
                    commands.poll(Math.max(1, deadline - System.currentTimeMillis()) + 30000, TimeUnit.MILLISECONDS);
                    System.out.println("closing");
                    System.out.flush();
                }
                break;
            }
            default:
                throw new IllegalArgumentException(cmd);
        }
    }
}
