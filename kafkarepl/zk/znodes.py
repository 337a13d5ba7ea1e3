"""Kafka's ZooKeeper-mode znodes: their paths and the JSON each holds (Kafka's ZkData),
as value types with their encodings. No ZooKeeper access here (zk.store does that).

Layout: /cluster/id, /controller (ephemeral), /controller_epoch,
/brokers/ids/<id> (ephemeral), /brokers/topics/<t>, /brokers/topics/<t>/partitions/<p>/state,
/admin/delete_topics/<t>, /admin/reassign_partitions, /admin/preferred_replica_election,
/config/topics/<t>, /config/brokers/<id|<default>>, /config/changes/config_change_<seq>,
/latest_producer_id_block, /delegation_token/tokens/<id>,
/delegation_token/token_changes/token_change_<seq>.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field

from kafkarepl.errors import ErrorCode, KafkaError

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_IPS = "/config/ips"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
DELEGATION_TOKENS = "/delegation_token/tokens"
TOKEN_CHANGES = "/delegation_token/token_changes"

PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    DELETE_TOPICS,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    DELEGATION_TOKENS,
    TOKEN_CHANGES,
    "/cluster",
)

DEFAULT_BROKER_CONFIG = "<default>"


# --- value types -------------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerEpochFence:
    """What the controller won: its epoch and /controller_epoch's zkVersion after the win."""

    epoch: int
    zk_version: int


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1  # czxid of the registration znode: changes at every (re)registration
    endpoints: list[Endpoint] = field(default_factory=list)
    timestamp_ms: int = 0


@dataclass
class TopicAssignment:
    name: str
    topic_id: str  # Kafka's textual Uuid (url-safe base64, no padding)
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    zk_version: int = -1


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1  # = partition epoch
    leader_recovery_state: int = 0

    @property
    def partition_epoch(self) -> int:
        return self.zk_version


# --- encodings ---------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def to_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def from_json(data: bytes) -> dict:
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KafkaError(f"corrupt JSON in ZooKeeper: {e}", ErrorCode.UNKNOWN_SERVER_ERROR) from e
    if not isinstance(value, dict):
        raise KafkaError("ZooKeeper znode holds no JSON object", ErrorCode.UNKNOWN_SERVER_ERROR)
    return value


def new_topic_id() -> str:
    # Kafka never hands out the zero Uuid nor one starting with '-' in text form.
    while True:
        u = uuid.uuid4()
        text = topic_id_from_uuid(u)
        if not text.startswith("-"):
            return text


def topic_id_from_uuid(u: uuid.UUID | bytes) -> str:
    raw = u.bytes if isinstance(u, uuid.UUID) else bytes(u)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def topic_id_to_uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError) as e:
        raise KafkaError(f"bad topic id {text!r}", ErrorCode.INVALID_REQUEST) from e


def encode_broker(info: BrokerInfo) -> bytes:
    endpoints = info.endpoints or [Endpoint("PLAINTEXT", info.host, info.port)]
    body = {
        "features": {},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
        "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in endpoints],
        "jmx_port": -1,
        "host": info.host,
        "port": info.port,
        "timestamp": str(info.timestamp_ms or now_ms()),
        "version": 5,
    }
    if info.rack is not None:
        body["rack"] = info.rack
    return to_json(body)


def decode_broker(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
    body = from_json(data)
    protocols = body.get("listener_security_protocol_map") or {}
    endpoints = []
    for text in body.get("endpoints") or []:
        listener, _, hostport = text.partition("://")
        host, _, port = hostport.rpartition(":")
        endpoints.append(
            Endpoint(listener, host.strip("[]"), int(port), protocols.get(listener, listener))
        )
    host = body.get("host") or (endpoints[0].host if endpoints else "")
    port = int(body.get("port", -1))
    if port < 0 and endpoints:
        port = endpoints[0].port
    return BrokerInfo(
        id=broker_id,
        host=host,
        port=port,
        rack=body.get("rack"),
        epoch=czxid,
        endpoints=endpoints,
        timestamp_ms=int(body.get("timestamp", 0)),
    )


def encode_topic(t: TopicAssignment) -> bytes:
    return to_json(
        {
            "version": 3,
            "partitions": {str(p): list(r) for p, r in sorted(t.partitions.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted(t.adding_replicas.items())},
            "removing_replicas": {str(p): list(r) for p, r in sorted(t.removing_replicas.items())},
            "topic_id": t.topic_id,
        }
    )


def decode_topic(name: str, data: bytes, zk_version: int = -1) -> TopicAssignment:
    body = from_json(data)

    def pmap(key: str) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (body.get(key) or {}).items()}

    return TopicAssignment(
        name=name,
        topic_id=body.get("topic_id") or "",
        partitions=pmap("partitions"),
        adding_replicas=pmap("adding_replicas"),
        removing_replicas=pmap("removing_replicas"),
        zk_version=zk_version,
    )


def encode_partition_state(s: PartitionState) -> bytes:
    body = {
        "version": 1,
        "leader": s.leader,
        "leader_epoch": s.leader_epoch,
        "controller_epoch": s.controller_epoch,
        "isr": list(s.isr),
    }
    if s.leader_recovery_state:
        body["leader_recovery_state"] = s.leader_recovery_state
    return to_json(body)


def decode_partition_state(data: bytes, zk_version: int) -> PartitionState:
    body = from_json(data)
    return PartitionState(
        leader=int(body["leader"]),
        leader_epoch=int(body["leader_epoch"]),
        isr=[int(b) for b in body["isr"]],
        controller_epoch=int(body["controller_epoch"]),
        zk_version=zk_version,
        leader_recovery_state=int(body.get("leader_recovery_state", 0)),
    )


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"
