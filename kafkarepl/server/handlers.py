"""Request dispatch: one small handler per API key; the work lives in the managers.

Handlers translate between wire bodies (dicts, see kafkarepl.protocol) and the
broker's managers (ReplicaManager, admin, controller); they hold no state themselves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafkarepl.errors import ErrorCode, UnsupportedVersionError
from kafkarepl.protocol import API, ApiKey, Request

if TYPE_CHECKING:
    from kafkarepl.server.broker import Broker
    from kafkarepl.server.network import Connection

log = logging.getLogger(__name__)

# APIs this broker answers; ApiVersions advertises exactly these (ranges from the
# protocol declarations, capped where the broker implements less).
SERVED = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.ELECT_LEADERS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.ALTER_PARTITION,
)


def api_versions_list() -> list[dict[str, int]]:
    return [
        {"api_key": int(k), "min_version": API[k].min_version, "max_version": API[k].max_version}
        for k in SERVED
        if k in API
    ]


class RequestHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        b = broker
        self._table = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: b.admin.metadata,
            ApiKey.PRODUCE: b.replica_manager.handle_produce,
            ApiKey.FETCH: b.replica_manager.handle_fetch,
            ApiKey.LIST_OFFSETS: b.replica_manager.handle_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: b.replica_manager.handle_offset_for_leader_epoch,
            ApiKey.LEADER_AND_ISR: b.replica_manager.handle_leader_and_isr,
            ApiKey.STOP_REPLICA: b.replica_manager.handle_stop_replica,
            ApiKey.UPDATE_METADATA: b.replica_manager.handle_update_metadata,
            ApiKey.CREATE_TOPICS: b.admin.create_topics,
            ApiKey.DELETE_TOPICS: b.admin.delete_topics,
            ApiKey.CREATE_PARTITIONS: b.admin.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: b.admin.describe_configs,
            ApiKey.ALTER_CONFIGS: b.admin.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: b.admin.incremental_alter_configs,
            ApiKey.INIT_PRODUCER_ID: b.admin.init_producer_id,
            ApiKey.DESCRIBE_CLUSTER: b.admin.describe_cluster,
            ApiKey.FIND_COORDINATOR: b.admin.find_coordinator,
            ApiKey.ELECT_LEADERS: b.admin.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: b.admin.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: b.admin.list_partition_reassignments,
            ApiKey.ALTER_PARTITION: b.admin.alter_partition,
            ApiKey.CONTROLLED_SHUTDOWN: b.admin.controlled_shutdown,
            ApiKey.SYNC_GROUP: b.group_coordinator.sync_group,
            ApiKey.HEARTBEAT: b.group_coordinator.heartbeat,
            ApiKey.LEAVE_GROUP: b.group_coordinator.leave_group,
            ApiKey.OFFSET_COMMIT: b.group_coordinator.offset_commit,
            ApiKey.OFFSET_FETCH: b.group_coordinator.offset_fetch,
            ApiKey.DESCRIBE_GROUPS: b.group_coordinator.describe_groups,
            ApiKey.LIST_GROUPS: b.group_coordinator.list_groups,
        }

    async def handle(self, req: Request, conn: Connection) -> dict[str, Any] | None:
        if req.api_key == ApiKey.JOIN_GROUP:  # the member's host is shown by DescribeGroups
            return await self.broker.group_coordinator.join_group(req, f"/{conn.peer[0]}" if conn.peer else "")
        fn = self._table.get(req.api_key)
        if fn is None:
            # Declared by the codec but not served: the client ignored ApiVersions.
            raise UnsupportedVersionError(f"API {req.api_key} is not served by this broker")
        return await fn(req)

    async def api_versions(self, req: Request) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": api_versions_list(), "throttle_time_ms": 0}

    def on_unsupported_version(self, exc: UnsupportedVersionError) -> dict[str, Any] | None:
        """ApiVersions at a version we lack gets error 35 + our ranges (KIP-511); the
        client retries at a version we list. Anything else: close the connection."""
        if getattr(exc, "api_key", None) == ApiKey.API_VERSIONS:
            return {
                "error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                "api_keys": api_versions_list(),
                "throttle_time_ms": 0,
            }
        return None
