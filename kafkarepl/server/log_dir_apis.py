"""DescribeLogDirs (kafka-log-dirs.sh): each log dir of this broker with the size and the
offset lag of its partitions (LEO behind the HW, as Kafka reports for current logs; for
the future log of a replica moving there, is_future_key and the current log's LEO minus
the future's), and the file system's total and usable bytes.

AlterReplicaLogDirs (kafka-reassign-partitions.sh with log_dirs, Admin.alterReplicaLogDirs):
moves replicas between this broker's log dirs (server.log_dir_mover)."""

from __future__ import annotations

import os
from typing import Any

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import Request
from kafkarepl.replication import ReplicaManager, TopicPartition
from kafkarepl.server.log_dir_mover import LogDirMover
from kafkarepl.storage.manager import LogManager

Body = dict[str, Any]


class LogDirApis:
    def __init__(self, log_manager: LogManager, replicas: ReplicaManager, mover: LogDirMover) -> None:
        self.log_manager = log_manager
        self.replicas = replicas
        self.mover = mover

    async def alter_replica_log_dirs(self, req: Request) -> Body:
        by_topic: dict[str, list[Body]] = {}
        for d in req.body["dirs"]:
            for t in d["topics"]:
                for partition in t["partitions"]:
                    code = self.mover.alter(TopicPartition(t["name"], partition), d["path"])
                    by_topic.setdefault(t["name"], []).append(
                        {"partition_index": partition, "error_code": int(code)})
        return {"throttle_time_ms": 0,
                "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}

    async def describe_log_dirs(self, req: Request) -> Body:
        wanted = req.body.get("topics")
        want: dict[str, set[int]] | None = None
        if wanted is not None:
            want = {t["topic"]: set(t["partitions"]) for t in wanted}
        lm = self.log_manager
        by_dir: dict[str, dict[str, list[Body]]] = {lm.dir_name(d): {} for d in lm.log_dirs}
        for (topic, partition), lg in sorted(self.log_manager.logs().items(), key=lambda kv: kv[0]):
            if want is not None and partition not in want.get(topic, ()):
                continue
            where = self.log_manager.log_dir_of(topic, partition)
            p = self.replicas.get(TopicPartition(topic, partition))
            lag = max(0, p.high_watermark - lg.log_end_offset) if p is not None else 0
            if where is None:  # not expected: a log's dir is known while it is
                continue
            by_dir.setdefault(lm.dir_name(where), {}).setdefault(topic, []).append({
                "partition_index": partition, "partition_size": lg.size_in_bytes,
                "offset_lag": lag, "is_future_key": False,
            })
        for (topic, partition), fut in sorted(self.log_manager.future_logs().items(), key=lambda kv: kv[0]):
            if want is not None and partition not in want.get(topic, ()):
                continue
            by_dir.setdefault(lm.dir_name(fut.dir.parent), {}).setdefault(topic, []).append({
                "partition_index": partition, "partition_size": fut.size_in_bytes,
                "offset_lag": self.mover.future_lag(TopicPartition(topic, partition)), "is_future_key": True,
            })
        results = []
        offline = {lm.dir_name(d) for d in lm.offline_dirs}
        for log_dir, topics in by_dir.items():
            if log_dir in offline:  # failed (KIP-112): listed with its error, as Kafka's
                results.append({"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": log_dir,
                                "total_bytes": -1, "usable_bytes": -1, "topics": []})
                continue
            try:
                st = os.statvfs(log_dir)
                total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            except OSError:
                total = usable = -1
            results.append({
                "error_code": 0, "log_dir": log_dir, "total_bytes": total, "usable_bytes": usable,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            })
        return {"throttle_time_ms": 0, "error_code": 0, "results": results}
