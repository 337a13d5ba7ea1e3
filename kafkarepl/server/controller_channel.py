"""This broker's way to the active controller: a direct call when the controller runs in
this process, else one persistent connection to it, re-opened when the controller moves.

AlterPartition, ControlledShutdown and the controller APIs that clients may send to any
broker (ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments) go here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kafkarepl.client import BrokerConnection
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import ApiKey
from kafkarepl.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

Body = dict[str, Any]


class LocalController(Protocol):
    @property
    def is_active(self) -> bool: ...

    async def handle_alter_partition(self, body: Body) -> Body: ...

    async def handle_controlled_shutdown(self, body: Body) -> Body: ...

    async def handle_elect_leaders(self, body: Body) -> Body: ...

    async def handle_alter_partition_reassignments(self, body: Body) -> Body: ...

    def list_partition_reassignments(self) -> dict[Any, Any]: ...


class ControllerChannel:
    def __init__(
        self, broker_id: int, metadata: MetadataCache, local: LocalController, request_timeout_s: float = 30.0,
        on_connection_lost: Callable[[int], None] | None = None,
        security: Any = None,
    ) -> None:
        self.security = security  # ssl.SSLContext of an SSL inter-broker listener
        self.broker_id = broker_id
        self.on_connection_lost = on_connection_lost  # the controller's broker may be dead
        self.metadata = metadata
        self.local = local
        self.request_timeout_s = request_timeout_s
        self._conn: BrokerConnection | None = None
        self._conn_to = -1

    def active_local(self) -> LocalController | None:
        return self.local if self.local.is_active else None

    async def send(self, api_key: ApiKey, version: int, body: Body) -> Body:
        """Run a controller API on the active controller. Raises KafkaError
        (NOT_CONTROLLER while none is known) or a connection error."""
        c = self.active_local()
        if c is not None:
            handlers: dict[ApiKey, Callable[[Body], Awaitable[Body]]] = {
                ApiKey.ALTER_PARTITION: c.handle_alter_partition,
                ApiKey.CONTROLLED_SHUTDOWN: c.handle_controlled_shutdown,
                ApiKey.ELECT_LEADERS: c.handle_elect_leaders,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: c.handle_alter_partition_reassignments,
            }
            return await handlers[api_key](body)
        cid = self.metadata.controller_id
        try:
            conn = await self._connection()
            resp = await conn.send(api_key, version, body)
        except KafkaError as exc:
            self.close()
            if exc.code is not ErrorCode.NOT_CONTROLLER and self.on_connection_lost is not None and cid is not None:
                self.on_connection_lost(cid)  # it probes: only a refusal counts
            raise
        except Exception:
            self.close()
            if self.on_connection_lost is not None and cid is not None:
                self.on_connection_lost(cid)
            raise
        assert resp is not None
        return resp

    async def _connection(self) -> BrokerConnection:
        cid = self.metadata.controller_id
        if self._conn is not None and self._conn.connected and self._conn_to == cid:
            return self._conn
        self.close()
        info = self.metadata.broker(cid)
        if info is None:
            raise KafkaError("no controller known yet", ErrorCode.NOT_CONTROLLER)
        conn = BrokerConnection(
            info.host, info.port, client_id=f"broker-{self.broker_id}-to-controller",
            request_timeout=self.request_timeout_s, security=self.security,
        )
        await conn.connect()
        self._conn, self._conn_to = conn, cid
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
