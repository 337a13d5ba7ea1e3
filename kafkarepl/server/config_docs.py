"""What each topic config means, as DescribeConfigs v3+ returns it in `documentation`
when asked (include_documentation): admin UIs show it beside the config they edit.

Every topic config Kafka defines has a line; a broker's `log.*` default of a topic config
is documented as that default. Other broker configs have none (null), which the protocol
allows.
"""

from __future__ import annotations

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


def config_documentation(name: str, broker: bool, topic_of_broker_default: dict[str, str]) -> str | None:
    """The documentation of a topic config, or of a broker's default of one
    (`topic_of_broker_default`: broker setting -> topic config); None otherwise."""
    if not broker:
        return TOPIC_CONFIG_DOCS.get(name)
    topic = topic_of_broker_default.get(name)
    doc = TOPIC_CONFIG_DOCS.get(topic) if topic is not None else None
    return None if doc is None else f"The default of the topic config {topic}: {doc}"
