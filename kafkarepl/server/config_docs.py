"""What each topic config means, as DescribeConfigs v3+ returns it in `documentation`
when asked (include_documentation): admin UIs show it beside the config they edit.

Every topic config Kafka defines has a line; a broker's `log.*` default of a topic config
is documented as that default, and the broker's own configs by BROKER_CONFIG_DOCS
(under a listener prefix too). Settings with no use here have none (null), which the
protocol allows.
"""

from __future__ import annotations

from kafkarepl.server.config import config_candidates

TOPIC_CONFIG_DOCS: dict[str, str] = {
    "cleanup.policy": "What happens to old log segments: \"delete\" removes them by retention time or size, "
                      "\"compact\" keeps the latest record of each key, \"compact,delete\" does both.",
    "compression.type": "The codec the topic stores its batches in (uncompressed, gzip, snappy, lz4, zstd); "
                        "\"producer\" keeps each producer's own codec.",
    "compression.gzip.level": "The gzip level used when the broker compresses batches with gzip.",
    "compression.lz4.level": "The lz4 level used when the broker compresses batches with lz4.",
    "compression.zstd.level": "The zstd level used when the broker compresses batches with zstd.",
    "delete.retention.ms": "How long a compacted topic keeps a tombstone (a record with a null value) after "
                           "cleaning, so that consumers reading behind still see the deletion.",
    "file.delete.delay.ms": "How long a deleted segment's files are kept open before they are removed from disk.",
    "flush.messages": "Force an fsync of the log after this many records (replication, not fsync, is the "
                      "usual durability guarantee).",
    "flush.ms": "Force an fsync of the log when this much time has passed since the last one.",
    "follower.replication.throttled.replicas": "Replicas whose follower-side replication is throttled: "
                                               "partition:broker pairs, or * for all.",
    "index.interval.bytes": "How many bytes of batches go between two entries of the sparse offset index.",
    "leader.replication.throttled.replicas": "Replicas whose leader-side replication is throttled: "
                                             "partition:broker pairs, or * for all.",
    "local.retention.bytes": "With tiered storage, the bytes kept on local disk (-2: as retention.bytes).",
    "local.retention.ms": "With tiered storage, the time segments are kept on local disk (-2: as retention.ms).",
    "max.compaction.lag.ms": "The longest a record can stay uncompacted in a compacted topic.",
    "max.message.bytes": "The largest record batch the topic accepts, after compression.",
    "message.downconversion.enable": "Whether fetches of old message formats are converted (always off: "
                                     "only record batch v2 is served).",
    "message.format.version": "The message format version (only v2 record batches are stored).",
    "message.timestamp.after.max.ms": "How far in the future a record's CreateTime may be; later records "
                                      "are refused.",
    "message.timestamp.before.max.ms": "How far in the past a record's CreateTime may be; older records "
                                       "are refused.",
    "message.timestamp.difference.max.ms": "Deprecated: the largest difference allowed between a record's "
                                           "timestamp and the broker's clock.",
    "message.timestamp.type": "Whether record timestamps are the producer's (CreateTime) or the broker's "
                              "append time (LogAppendTime).",
    "min.cleanable.dirty.ratio": "The share of a compacted log that must be uncleaned before the cleaner "
                                 "cleans it.",
    "min.compaction.lag.ms": "The shortest time a record stays uncompacted in a compacted topic.",
    "min.insync.replicas": "With acks=all, the fewest in-sync replicas that must have a write before it is "
                           "acknowledged; below it, produce fails with NOT_ENOUGH_REPLICAS.",
    "preallocate": "Whether a new segment file is preallocated on disk.",
    "remote.storage.enable": "Whether the topic uses tiered storage.",
    "remote.log.copy.disable": "With tiered storage, stop copying segments to remote storage.",
    "remote.log.delete.on.disable": "With tiered storage, delete the remote data when it is disabled.",
    "retention.bytes": "The largest size a partition grows to before its oldest segments are deleted "
                       "(-1: no limit).",
    "retention.ms": "How long records are kept before their segment is deleted (-1: forever).",
    "segment.bytes": "The size at which a partition's active segment is rolled.",
    "segment.index.bytes": "The size of a segment's offset and time index files.",
    "segment.jitter.ms": "A random amount up to this much taken off segment.ms, so that partitions do not "
                         "all roll at once.",
    "segment.ms": "The time after which the active segment is rolled even if it is not full.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become leader when no in-sync "
                                      "replica is left (availability over losing acknowledged writes).",
}


# The broker's own configs (those that are not a topic config's default), by Kafka's
# meaning; kafkarepl.* ones are kafkarepl's (docs/operations.md has the details).
BROKER_CONFIG_DOCS: dict[str, str] = {
    "advertised.listeners": "The listeners clients are told to connect to (name://host:port,...), when they "
                            "differ from the bound ones.",
    "allow.everyone.if.no.acl.found": "Whether a resource without any ACL is open to every principal.",
    "authorizer.class.name": "The authorizer checking ACLs on every request (empty: none, everything allowed).",
    "auto.create.topics.enable": "Whether a Metadata request naming an unknown topic creates it, with "
                                 "num.partitions and default.replication.factor.",
    "auto.leader.rebalance.enable": "Whether the controller moves leadership back to preferred replicas when "
                                    "a broker's share of non-preferred leaders passes the imbalance threshold.",
    "broker.id": "This broker's id, unique in the cluster.",
    "broker.rack": "This broker's rack: replicas of a partition are spread over racks, and consumers may "
                   "fetch from a replica in their own (client.rack).",
    "cluster.name": "The name this cluster reports.",
    "connection.failed.authentication.delay.ms": "How long a connection that failed to authenticate is held "
                                                 "before it is closed (slows down password guessing).",
    "connections.max.idle.ms": "Connections idle for longer than this are closed (negative: never).",
    "connections.max.reauth.ms": "The longest a SASL session lasts before the client must re-authenticate "
                                 "(0: no limit).",
    "controlled.shutdown.enable": "Whether a stopping broker first asks the controller to move its "
                                  "leaderships elsewhere.",
    "controlled.shutdown.max.retries": "How many times a stopping broker asks the controller for a controlled "
                                       "shutdown before it stops anyway.",
    "controlled.shutdown.retry.backoff.ms": "The wait between controlled shutdown attempts.",
    "default.replication.factor": "The replication factor of automatically created topics.",
    "delegation.token.expiry.check.interval.ms": "How often expired delegation tokens are removed.",
    "delegation.token.expiry.time.ms": "How long a delegation token lives before it must be renewed.",
    "delegation.token.master.key": "Deprecated name of delegation.token.secret.key.",
    "delegation.token.max.lifetime.ms": "The longest a delegation token can be renewed to.",
    "delegation.token.secret.key": "The secret delegation tokens are signed with; empty disables them.",
    "delete.topic.enable": "Whether topics can be deleted.",
    "follower.replication.throttled.rate": "The replication bytes per second a follower may fetch for "
                                           "the throttled replicas of a reassignment (dynamic only).",
    "fetch.max.bytes": "The most record bytes one Fetch answer holds, whatever the request asks.",
    "group.consumer.assignors": "The server-side assignors KIP-848 consumer groups may ask for (uniform, "
                                "range); the first is the default.",
    "group.consumer.migration.policy": "Whether a consumer group converts online between the classic protocol and "
                                       "KIP-848's: upgrade, downgrade, bidirectional or disabled.",
    "group.consumer.heartbeat.interval.ms": "How often a KIP-848 consumer group member heartbeats.",
    "group.consumer.max.size": "The most members a KIP-848 consumer group may have.",
    "group.consumer.session.timeout.ms": "How long a KIP-848 consumer group member may go without a heartbeat "
                                         "before it is removed from its group.",
    "group.initial.rebalance.delay.ms": "How long a new consumer group waits for more members before its "
                                        "first rebalance.",
    "group.max.session.timeout.ms": "The longest session timeout a group member may ask for.",
    "group.max.size": "The most members a consumer group may have.",
    "group.min.session.timeout.ms": "The shortest session timeout a group member may ask for.",
    "inter.broker.listener.name": "The listener brokers use to talk to each other.",
    "kafkarepl.fast.failover.enable": "Whether a broker whose listener refuses connections is fenced at once "
                                      "rather than after its ZooKeeper session expires.",
    "kafkarepl.log.cleaner.test.pause.before.swap.ms": "For tests only: hold each cleaning before its swap.",
    "kafkarepl.log.cleaner.thread.io.priority": "The I/O priority class of the cleaner threads (empty: "
                                                "unchanged; idle: served when no other I/O waits).",
    "kafkarepl.log.cleaner.thread.nice": "The Linux nice value of the cleaner threads.",
    "kafkarepl.log.cleaner.thread.sched.idle": "Whether the cleaner threads run under SCHED_IDLE.",
    "kafkarepl.log.cleaner.yield.interval.us": "How often the cleaner's C loops yield the CPU "
                                               "(0: never).",
    "kafkarepl.max.decompressed.request.bytes": "The most bytes the compressed batches of one produce "
                                                "request may inflate to while the leader validates them.",
    "kafkarepl.max.request.entries": "The most array entries one request may hold; larger requests close "
                                     "the connection.",
    "kafkarepl.offsets.retention.ms": "offsets.retention.minutes in milliseconds, when set (-1: unset).",
    "leader.replication.throttled.rate": "The replication bytes per second a leader may send to the throttled "
                                         "replicas of a reassignment (dynamic only).",
    "leader.imbalance.check.interval.seconds": "How often the controller checks for leader imbalance.",
    "leader.imbalance.per.broker.percentage": "The share of a broker's partitions led elsewhere than their "
                                              "preferred replica above which leadership is moved back.",
    "listener.security.protocol.map": "Each listener's security protocol (name:protocol,...).",
    "listeners": "The addresses this broker listens on (name://host:port,...).",
    "log.cleaner.backoff.ms": "How long the cleaner sleeps when there is no log to clean.",
    "log.cleaner.dedupe.buffer.size": "The memory of the cleaner's offset maps, over all cleaner threads.",
    "log.cleaner.enable": "Whether the log cleaner runs (compacted topics need it).",
    "log.cleaner.io.buffer.load.factor": "How full the cleaner's offset map may get.",
    "log.cleaner.io.max.bytes.per.second": "The cleaner's I/O limit, reads and writes together.",
    "log.cleaner.threads": "The number of cleaner threads.",
    "log.dir": "The directory the log is kept in, when log.dirs is not set.",
    "log.dirs": "The directories logs are kept in (comma-separated); partitions are spread over them.",
    "log.flush.offset.checkpoint.interval.ms": "How often the recovery point checkpoint is written.",
    "log.flush.start.offset.checkpoint.interval.ms": "How often the log start offset checkpoint is written "
                                                     "(a follower's log start follows its leader's).",
    "log.flush.scheduler.interval.ms": "How often logs are checked for a flush.ms that elapsed.",
    "log.retention.check.interval.ms": "How often segments are checked against retention.",
    "log.retention.hours": "The default retention.ms of topics, in hours (log.retention.ms wins).",
    "log.retention.minutes": "The default retention.ms of topics, in minutes (log.retention.ms wins).",
    "log.roll.hours": "The default segment.ms of topics, in hours (log.roll.ms wins).",
    "log.roll.jitter.hours": "The default segment.jitter.ms of topics, in hours (log.roll.jitter.ms wins).",
    "max.connection.creation.rate": "The most new connections per second the broker accepts.",
    "max.connections": "The most connections the broker keeps open.",
    "max.connections.per.ip": "The most connections from one IP address.",
    "max.connections.per.ip.overrides": "Per-address exceptions to max.connections.per.ip (host:count,...).",
    "max.incremental.fetch.session.cache.slots": "The most incremental fetch sessions the broker keeps.",
    "max.partitions": "The most partitions in the cluster; topics that would pass it are refused.",
    "max.partitions.per.request": "The most new partitions one CreateTopics or CreatePartitions request "
                                  "may create.",
    "metrics.port": "The port metrics are served on as Prometheus text (-1: off).",
    "num.partitions": "The partition count of automatically created topics.",
    "num.replica.fetchers": "Fetcher connections per source broker for follower replication.",
    "offset.metadata.max.bytes": "The largest metadata string a committed offset may carry.",
    "offsets.commit.timeout.ms": "How long an offset commit waits for its write to be replicated.",
    "offsets.retention.check.interval.ms": "How often expired committed offsets are removed.",
    "offsets.retention.minutes": "How long an empty group's committed offsets are kept.",
    "offsets.topic.num.partitions": "The partition count of __consumer_offsets.",
    "offsets.topic.replication.factor": "The replication factor of __consumer_offsets.",
    "offsets.topic.segment.bytes": "The segment size of __consumer_offsets.",
    "producer.id.expiration.check.interval.ms": "How often idle producer ids are expired.",
    "producer.id.expiration.ms": "How long a producer id's state is kept after its last write.",
    "queued.max.request.bytes": "The most bytes of requests read and not yet handled (-1: no limit).",
    "quota.window.num": "The number of windows client quotas are measured over.",
    "quota.window.size.seconds": "The length of each client quota window.",
    "replica.alter.log.dirs.io.max.bytes.per.second": "The bytes per second a replica moving between log dirs "
                                                      "may be copied at (dynamic only).",
    "replica.fetch.backoff.ms": "How long a follower waits after a failed fetch.",
    "replica.fetch.max.bytes": "The most bytes a follower fetches per partition.",
    "replica.fetch.min.bytes": "The least bytes a follower's fetch waits for.",
    "replica.fetch.response.max.bytes": "The most bytes of one follower fetch answer.",
    "replica.fetch.wait.max.ms": "The longest a follower's fetch waits for data.",
    "replica.high.watermark.checkpoint.interval.ms": "How often high watermarks are checkpointed.",
    "replica.lag.time.max.ms": "A follower that has not caught up with the leader's log end for this long "
                               "is removed from the ISR.",
    "replica.selector.class": "The selector of the replica a consumer fetches from: empty, or "
                              "org.apache.kafka.common.replica.LeaderSelector, for the leader; "
                              "org.apache.kafka.common.replica.RackAwareReplicaSelector for an in-sync "
                              "follower in the consumer's client.rack (KIP-392).",
    "request.timeout.ms": "How long the broker's own requests to other brokers wait for an answer.",
    "sasl.enabled.mechanisms": "The SASL mechanisms the broker accepts.",
    "sasl.jaas.config": "The JAAS login configuration of the SASL mechanisms.",
    "sasl.mechanism.inter.broker.protocol": "The SASL mechanism brokers use with each other.",
    "sasl.server.max.receive.size": "The largest SASL message accepted before authentication.",
    "security.inter.broker.protocol": "The security protocol brokers use with each other.",
    "socket.request.max.bytes": "The largest request the broker reads.",
    "ssl.cipher.suites": "The TLS cipher suites allowed (empty: the defaults).",
    "ssl.client.auth": "Whether TLS clients must (required), may (requested) or need not (none) present a "
                       "certificate.",
    "ssl.enabled.protocols": "The TLS versions allowed.",
    "ssl.endpoint.identification.algorithm": "How a peer's host name is checked against its certificate "
                                             "(https, or empty: not checked).",
    "ssl.key.password": "The password of the private key.",
    "ssl.keystore.certificate.chain": "The broker's certificate chain in PEM.",
    "ssl.keystore.key": "The broker's private key in PEM.",
    "ssl.keystore.location": "The broker's keystore file.",
    "ssl.keystore.type": "The keystore file's format.",
    "ssl.principal.mapping.rules": "Rules mapping a client certificate's subject to a principal name.",
    "ssl.truststore.certificates": "The trusted certificates in PEM.",
    "ssl.truststore.location": "The truststore file.",
    "ssl.truststore.type": "The truststore file's format.",
    "super.users": "Principals allowed everything whatever the ACLs (User:name;...).",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "How often timed-out transactions are "
                                                                   "aborted.",
    "transaction.max.timeout.ms": "The longest transaction timeout a producer may ask for.",
    "transaction.partition.verification.enable": "Whether a transactional write is checked against the "
                                                 "coordinator before it is appended (KIP-890).",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "How often expired transactional ids are "
                                                                  "removed.",
    "transaction.state.log.min.isr": "The min.insync.replicas of __transaction_state.",
    "transaction.state.log.num.partitions": "The partition count of __transaction_state.",
    "transaction.state.log.replication.factor": "The replication factor of __transaction_state.",
    "transaction.state.log.segment.bytes": "The segment size of __transaction_state.",
    "transactional.id.expiration.ms": "How long an idle transactional id's state is kept.",
    "zookeeper.connect": "The ZooKeeper ensemble (host:port,.../chroot).",
    "zookeeper.connection.timeout.ms": "How long the broker waits for ZooKeeper at start.",
    "zookeeper.session.timeout.ms": "The broker's ZooKeeper session timeout: a broker silent for this long "
                                    "is taken for dead.",
}


def config_documentation(name: str, broker: bool, topic_of_broker_default: dict[str, str]) -> str | None:
    """The documentation of a topic config, of a broker's default of one
    (`topic_of_broker_default`: broker setting -> topic config), or of a broker config;
    None otherwise."""
    if not broker:
        return TOPIC_CONFIG_DOCS.get(name)
    topic = topic_of_broker_default.get(name)
    doc = TOPIC_CONFIG_DOCS.get(topic) if topic is not None else None
    if doc is not None:
        return f"The default of the topic config {topic}: {doc}"
    for candidate in config_candidates(name):  # listener.name.<l>.[<mechanism>.]<config>
        if candidate in BROKER_CONFIG_DOCS:
            return BROKER_CONFIG_DOCS[candidate]
    return None
