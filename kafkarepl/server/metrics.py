"""Operator metrics, named after Kafka's, served as Prometheus text on metrics.port.

Gauges are computed from live partition state when scraped (no bookkeeping to drift);
counters (ISR shrinks/expands, unclean elections) come from the replication core.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkarepl.aio import with_timeout

if TYPE_CHECKING:
    from kafkarepl.controller.controller import Controller
    from kafkarepl.replication import ReplicaManager
    from kafkarepl.server.fetch_session import FetchSessionCache
    from kafkarepl.server.network import SocketServer

log = logging.getLogger(__name__)


class BrokerMetrics:
    def __init__(
        self, broker_id: int, replicas: ReplicaManager, server: SocketServer, controller: Controller,
        fetch_sessions: FetchSessionCache | None = None,
        sources: tuple[Callable[[], dict[str, float]], ...] = (),
    ) -> None:
        self.fetch_sessions = fetch_sessions
        self.sources = sources  # other services' gauges (the log cleaner's)
        self.broker_id = broker_id
        self.replicas = replicas
        self.server = server
        self.controller = controller
        self._server: asyncio.base_events.Server | None = None

    def snapshot(self) -> dict[str, float]:
        from kafkarepl.replication import gauges

        rm = self.replicas
        g = gauges(rm.partitions.values())
        m = rm.metrics
        out: dict[str, float] = {
            "kafka_server_replicamanager_partitioncount": len(rm.partitions),
            "kafka_server_replicamanager_leadercount": g.leader_count,
            "kafka_server_replicamanager_underreplicatedpartitions": g.under_replicated,
            "kafka_server_replicamanager_underminisrpartitioncount": g.under_min_isr,
            "kafka_server_replicamanager_atminisrpartitioncount": g.at_min_isr,
            "kafka_server_replicamanager_isrshrinks_total": m.isr_shrinks,
            "kafka_server_replicamanager_isrexpands_total": m.isr_expands,
            "kafka_server_replicamanager_failedisrupdates_total": m.failed_isr_updates,
            "kafka_server_replicamanager_uncleanleaderelections_total": m.unclean_elections,
            "kafka_server_replicafetchermanager_maxlag": g.max_follower_lag,
            "kafka_server_delayedoperationpurgatory_produce_waiting": len(rm.produce_purgatory),
            "kafka_server_delayedoperationpurgatory_fetch_waiting": len(rm.fetch_purgatory),
            "kafka_network_socketserver_connections": len(self.server.connections),
            # KIP-227 (Kafka's NumIncrementalFetchSessions)
            "kafka_server_fetchsessioncache_numincrementalfetchsessions":
                len(self.fetch_sessions) if self.fetch_sessions is not None else 0,
            # Kafka's successful-reauthentication-total (KIP-368)
            "kafka_server_socket_server_metrics_successful_reauthentication_total": self.server.reauthentications,
        }
        for k, v in self.controller.metrics.as_dict().items():
            out[f"kafka_controller_{k}"] = v
        for source in self.sources:
            out.update(source())
        return out

    def prometheus_text(self) -> str:
        """One line per metric; a name may carry its own labels (`name{logDirectory="..."}`),
        the broker's label is put first."""
        bid = self.broker_id
        lines = []
        for k, v in sorted(self.snapshot().items()):
            name, _, labels = k.partition("{")
            lines.append(f'{name}{{broker="{bid}"{"," + labels if labels else "}"} {v}')
        return "\n".join(lines) + "\n"

    async def serve(self, host: str, port: int) -> None:
        """A minimal HTTP endpoint: any GET returns the Prometheus text."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await with_timeout(reader.readuntil(b"\r\n\r\n"), 5)
                body = self.prometheus_text().encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(handle, host, port)
