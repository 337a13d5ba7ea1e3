"""DescribeLogDirs (kafka-log-dirs.sh): each log dir of this broker with the size and the
offset lag of its partitions (LEO behind the HW, as Kafka reports for current logs), and
the file system's total and usable bytes."""

from __future__ import annotations

import os
from typing import Any

from kafkarepl.protocol import Request
from kafkarepl.replication import ReplicaManager, TopicPartition
from kafkarepl.storage.manager import LogManager

Body = dict[str, Any]


class LogDirApis:
    def __init__(self, log_manager: LogManager, replicas: ReplicaManager) -> None:
        self.log_manager = log_manager
        self.replicas = replicas

    async def describe_log_dirs(self, req: Request) -> Body:
        wanted = req.body.get("topics")
        want: dict[str, set[int]] | None = None
        if wanted is not None:
            want = {t["topic"]: set(t["partitions"]) for t in wanted}
        by_dir: dict[str, dict[str, list[Body]]] = {str(d): {} for d in self.log_manager.log_dirs}
        for (topic, partition), lg in sorted(self.log_manager.logs().items(), key=lambda kv: kv[0]):
            if want is not None and partition not in want.get(topic, ()):
                continue
            where = self.log_manager.log_dir_of(topic, partition)
            p = self.replicas.get(TopicPartition(topic, partition))
            lag = max(0, p.high_watermark - lg.log_end_offset) if p is not None else 0
            by_dir.setdefault(str(where), {}).setdefault(topic, []).append({
                "partition_index": partition, "partition_size": lg.size_in_bytes,
                "offset_lag": lag, "is_future_key": False,
            })
        results = []
        for log_dir, topics in by_dir.items():
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
