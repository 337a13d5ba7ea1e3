"""Request dispatch: API key -> the request-layer method that serves it.

The request layer (replica_apis, metadata_apis, topics, configs, controller_apis,
group_coordinator, producer_ids) translates wire bodies (dicts, see kafkarepl.protocol)
into calls on the services and back; it holds no replication state itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from kafkarepl.errors import ErrorCode, UnsupportedVersionError
from kafkarepl.protocol import API, ApiKey, Request
from kafkarepl.server.delegation_tokens import Requester
from kafkarepl.server.quota_gate import ClientQuotaGate
from kafkarepl.server.request_authorization import RequestAuthorizer, set_session

if TYPE_CHECKING:
    from kafkarepl.server.acl_apis import AclApis
    from kafkarepl.server.client_quota_apis import ClientQuotaApis
    from kafkarepl.server.configs import ConfigApis
    from kafkarepl.server.controller_apis import ControllerApis
    from kafkarepl.server.delegation_tokens import DelegationTokenApis
    from kafkarepl.server.group_coordinator import GroupCoordinatorService
    from kafkarepl.server.log_dir_apis import LogDirApis
    from kafkarepl.server.metadata_apis import MetadataApis
    from kafkarepl.server.network import Connection
    from kafkarepl.server.producer_ids import ProducerIdManager
    from kafkarepl.server.replica_apis import ReplicaApis
    from kafkarepl.server.scram_credentials import ScramCredentials
    from kafkarepl.server.topics import TopicApis
    from kafkarepl.server.txn_coordinator import TransactionCoordinatorService

log = logging.getLogger(__name__)
ANONYMOUS = "User:ANONYMOUS"

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
    ApiKey.DESCRIBE_ACLS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_DELETE,
    ApiKey.DELETE_RECORDS,
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.DESCRIBE_PRODUCERS,
    ApiKey.WRITE_TXN_MARKERS,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.DESCRIBE_TRANSACTIONS,
    ApiKey.LIST_TRANSACTIONS,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.SASL_HANDSHAKE,
    ApiKey.SASL_AUTHENTICATE,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.CREATE_DELEGATION_TOKEN,
    ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.EXPIRE_DELEGATION_TOKEN,
    ApiKey.DESCRIBE_DELEGATION_TOKEN,
)


def token_requester(conn: Connection) -> Requester:
    """Kafka's allowTokenRequests: a SASL login that did not use a delegation token, or a
    TLS client certificate; never a plaintext or anonymous TLS connection."""
    principal = conn.principal
    if conn.sasl is not None:
        return Requester(principal, conn.sasl.complete and not conn.sasl.token_authenticated)
    return Requester(principal, conn.listener.ssl_context is not None and principal != ANONYMOUS)


def api_versions_list() -> list[dict[str, int]]:
    return [
        {"api_key": int(k), "min_version": API[k].min_version, "max_version": API[k].max_version}
        for k in SERVED
        if k in API
    ]


Handler = Callable[[Request], Awaitable[Any]]


class RequestHandlers:
    """The dispatch table: API key -> the request-layer method that serves it."""

    def __init__(
        self,
        replica: ReplicaApis,
        metadata: MetadataApis,
        topics: TopicApis,
        configs: ConfigApis,
        controller: ControllerApis,
        groups: GroupCoordinatorService,
        producer_ids: ProducerIdManager,
        acls: AclApis,
        log_dirs: LogDirApis,
        txn: TransactionCoordinatorService,
        scram: ScramCredentials,
        client_quotas: ClientQuotaApis,
        tokens: DelegationTokenApis,
        quota_gate: ClientQuotaGate,
        authz: RequestAuthorizer | None = None,
    ) -> None:
        self.authz = authz or RequestAuthorizer(None)
        self.quota_gate = quota_gate
        self.groups = groups
        self.producer_ids = producer_ids
        self.txn = txn
        self._table: dict[ApiKey, Handler] = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: metadata.metadata_request,
            ApiKey.DESCRIBE_CLUSTER: metadata.describe_cluster,
            ApiKey.PRODUCE: replica.produce,
            ApiKey.FETCH: replica.fetch,
            ApiKey.LIST_OFFSETS: replica.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: replica.offset_for_leader_epoch,
            ApiKey.LEADER_AND_ISR: replica.leader_and_isr,
            ApiKey.STOP_REPLICA: replica.stop_replica,
            ApiKey.UPDATE_METADATA: replica.update_metadata,
            ApiKey.CREATE_TOPICS: topics.create_topics,
            ApiKey.DELETE_TOPICS: topics.delete_topics,
            ApiKey.CREATE_PARTITIONS: topics.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
            ApiKey.ALTER_CONFIGS: configs.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: txn.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: lambda req: txn.add_offsets_to_txn(req, groups.core.partition_for),
            ApiKey.END_TXN: txn.end_txn,
            ApiKey.TXN_OFFSET_COMMIT: groups.txn_offset_commit,
            ApiKey.DESCRIBE_TRANSACTIONS: txn.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: txn.list_transactions,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram.describe,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram.alter,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.describe,
            ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.alter,
            ApiKey.SASL_HANDSHAKE: self.sasl_not_enabled,
            ApiKey.SASL_AUTHENTICATE: self.sasl_not_enabled,
            ApiKey.ELECT_LEADERS: controller.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: controller.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: controller.list_partition_reassignments,
            ApiKey.ALTER_PARTITION: controller.alter_partition,
            ApiKey.CONTROLLED_SHUTDOWN: controller.controlled_shutdown,
            ApiKey.FIND_COORDINATOR: groups.find_coordinator,
            ApiKey.SYNC_GROUP: groups.sync_group,
            ApiKey.HEARTBEAT: groups.heartbeat,
            ApiKey.LEAVE_GROUP: groups.leave_group,
            ApiKey.OFFSET_COMMIT: groups.offset_commit,
            ApiKey.OFFSET_FETCH: groups.offset_fetch,
            ApiKey.DESCRIBE_GROUPS: groups.describe_groups,
            ApiKey.LIST_GROUPS: groups.list_groups,
            ApiKey.CONSUMER_GROUP_DESCRIBE: groups.consumer_group_describe,
            ApiKey.DELETE_GROUPS: groups.delete_groups,
            ApiKey.OFFSET_DELETE: groups.offset_delete,
            ApiKey.DELETE_RECORDS: replica.delete_records,
            ApiKey.DESCRIBE_PRODUCERS: replica.describe_producers,
            ApiKey.WRITE_TXN_MARKERS: replica.write_txn_markers,
            ApiKey.DESCRIBE_LOG_DIRS: log_dirs.describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: log_dirs.alter_replica_log_dirs,
            ApiKey.DESCRIBE_ACLS: acls.describe_acls,
            ApiKey.CREATE_ACLS: acls.create_acls,
            ApiKey.DELETE_ACLS: acls.delete_acls,
        }
        # Served knowing who asks, and how it logged in (a token may not ask for tokens).
        self._token_apis: dict[ApiKey, Callable[..., Awaitable[Any]]] = {  # (request, who=Requester)
            ApiKey.CREATE_DELEGATION_TOKEN: tokens.create,
            ApiKey.RENEW_DELEGATION_TOKEN: tokens.renew,
            ApiKey.EXPIRE_DELEGATION_TOKEN: tokens.expire,
            ApiKey.DESCRIBE_DELEGATION_TOKEN: tokens.describe,
        }

    async def handle(self, req: Request, conn: Connection) -> dict[str, Any] | None:
        removed = None
        if self.authz.enabled:
            set_session(getattr(conn, "principal", "User:ANONYMOUS"), conn.peer[0] if conn.peer else "*")
            removed = self.authz.gate(req)  # KafkaError: denied as a whole
        if req.api_key == ApiKey.JOIN_GROUP:  # the member's host is shown by DescribeGroups
            return await self.groups.join_group(req, f"/{conn.peer[0]}" if conn.peer else "")
        if req.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:  # and by ConsumerGroupDescribe
            return await self.groups.consumer_group_heartbeat(req, f"/{conn.peer[0]}" if conn.peer else "",
                                                              self.authz.topic_describer())
        fn = self._table.get(req.api_key)
        token_api = self._token_apis.get(req.api_key)
        if token_api is not None:
            fn = partial(token_api, who=token_requester(conn))
        if fn is None:
            # Declared by the codec but not served: the client ignored ApiVersions.
            raise UnsupportedVersionError(f"API {req.api_key} is not served by this broker")
        result: dict[str, Any] | None
        if removed is not None and removed.not_attempted:  # nothing of it may be done
            result = {"throttle_time_ms": 0, "results_by_topic_v3_and_below": []}
        elif self.quota_gate.active:
            result = await self.quota_gate.serve(req, conn, fn)
        else:
            result = await fn(req)
        if removed is not None:
            result = self.authz.merge(req, removed, result)
        return result

    async def sasl_not_enabled(self, req: Request) -> dict[str, Any]:
        """SASL requests on a listener without SASL (a SASL listener's connections
        answer them before they get here, network.py)."""
        if req.api_key == ApiKey.SASL_HANDSHAKE:
            return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "error_message": "SASL is not enabled on this listener",
                "auth_bytes": b"", "session_lifetime_ms": 0}

    async def init_producer_id(self, req: Request) -> dict[str, Any]:
        """Idempotent producers get an id here; transactional ones from their coordinator."""
        if req.body.get("transactional_id") is not None:
            return await self.txn.init_producer_id(req)
        return await self.producer_ids.init_producer_id(req)

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
