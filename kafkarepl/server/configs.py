"""Configs: the ConfigService (topic overrides in ZooKeeper, applied to this broker's
replicas when they change) and the request layer of DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs."""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.protocol import Request
from kafkarepl.replication import ReplicaManager
from kafkarepl.server import listener_keystores
from kafkarepl.server.config import (
    BrokerConfig,
    ConfigError,
    config_is_sensitive,
    parse_connections_per_ip_overrides,
)
from kafkarepl.server.config_docs import config_documentation
from kafkarepl.server.config_types import broker_config_type, topic_config_type
from kafkarepl.server.password_encoder import PasswordEncoder
from kafkarepl.server.replica_storage import LogStorage, log_config
from kafkarepl.server.topics import (
    CONFIG_SOURCE_DEFAULT,
    CONFIG_SOURCE_TOPIC,
    TOPIC_ONLY_DEFAULTS,
    require_valid_topic_name,
    validate_topic_configs,
)
from kafkarepl.server.zk_guard import GuardedStore

log = logging.getLogger(__name__)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
CONFIG_SOURCE_DYNAMIC_BROKER = 2
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER = 3
CONFIG_SOURCE_STATIC_BROKER = 4
# Broker configs an operator may change at run time (kafka-configs.sh --entity-type
# brokers; kafka-reassign-partitions.sh sets and clears the throttles). Stored in
# /config/brokers/<id> (or <default>) as Kafka's ZooKeeper mode does; every broker applies
# them at once through /config/changes (the throttles: server/replication_quota.py).
DYNAMIC_BROKER_CONFIGS = frozenset({
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    # connection limits, as Kafka's DynamicConnectionQuota (applied by the broker at once)
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connection.creation.rate",
    # Kafka's ProducerStateManagerConfig reconfigurables
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
})
OP_SET, OP_DELETE = 0, 1
Synonym = tuple[str, str, int]  # name, value, source


def broker_synonyms(topic_config: str) -> list[str]:
    """The broker settings a topic config defaults to, most specific first (Kafka's
    synonyms: retention.ms <- log.retention.ms, log.retention.minutes, log.retention.hours)."""
    special = {
        "retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
        "segment.ms": ["log.roll.ms", "log.roll.hours"],
        "segment.jitter.ms": ["log.roll.jitter.ms", "log.roll.jitter.hours"],
        "max.message.bytes": ["message.max.bytes"],
        "cleanup.policy": ["log.cleanup.policy"],
        "delete.retention.ms": ["log.cleaner.delete.retention.ms"],
        "min.cleanable.dirty.ratio": ["log.cleaner.min.cleanable.ratio"],
        "min.compaction.lag.ms": ["log.cleaner.min.compaction.lag.ms"],
        "max.compaction.lag.ms": ["log.cleaner.max.compaction.lag.ms"],
        "flush.messages": ["log.flush.interval.messages"],
        "flush.ms": ["log.flush.interval.ms"],
        "index.interval.bytes": ["log.index.interval.bytes"],
        "segment.index.bytes": ["log.index.size.max.bytes"],
        "min.insync.replicas": ["min.insync.replicas"],
        "unclean.leader.election.enable": ["unclean.leader.election.enable"],
        "compression.type": ["compression.type"],
        "compression.gzip.level": ["compression.gzip.level"],
        "compression.lz4.level": ["compression.lz4.level"],
        "compression.zstd.level": ["compression.zstd.level"],
        "file.delete.delay.ms": ["log.segment.delete.delay.ms"],
    }
    return special.get(topic_config, [f"log.{topic_config}"])


# Kafka's synonyms of a broker setting given in several units (brokerConfigSynonyms).
_COARSE_GROUPS: dict[str, tuple[str, ...]] = {
    n: group for group in (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                           ("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"))
    for n in group}
# Of these, Kafka's default lives in the hours alone (log.retention.ms and .minutes are
# null); kafkarepl's ms settings hold the resolved value, not a default of their own.
_COARSE_DEFAULTS = {"log.retention.hours": "168", "log.roll.hours": "168", "log.roll.jitter.hours": "0"}


@functools.cache
def _builtin_props() -> dict[str, str]:
    return BrokerConfig().as_props()


def builtin_broker_default(name: str) -> str | None:
    """Kafka's built-in default of a broker setting, None where it has none."""
    if name in _COARSE_GROUPS:
        return _COARSE_DEFAULTS.get(name)
    return _builtin_props().get(name)


def setting_synonyms(names: Iterable[str], dynamic: Iterable[tuple[Mapping[str, str], int]],
                     props: Mapping[str, str], explicit: Collection[str]) -> list[Synonym]:
    """The values of broker settings `names` (most specific first) in Kafka's order
    (ConfigHelper.configSynonyms): by source, the dynamic per-broker and cluster-wide
    values, server.properties, the built-in default; within a source, by name."""
    names = list(names)
    out = [(b, values[b], source) for values, source in dynamic for b in names if b in values]
    out += [(b, props[b], CONFIG_SOURCE_STATIC_BROKER) for b in names if b in explicit and b in props]
    return out + [(b, d, CONFIG_SOURCE_DEFAULT) for b in names if (d := builtin_broker_default(b)) is not None]


# The broker defaults of topic configs an operator may also change at run time, for every
# broker (--entity-default) or one, as Kafka's DynamicLogConfig: broker name -> topic name.
# Every topic without its own override takes the new value at once.
DYNAMIC_LOG_CONFIGS: dict[str, str] = {broker_synonyms(t)[0]: t for t in BrokerConfig().topic_defaults()}


def dynamic_topic_defaults(broker_configs: dict[str, str]) -> dict[str, str]:
    """The dynamic broker configs that are topic defaults, under the topic config names."""
    return {DYNAMIC_LOG_CONFIGS[k]: v for k, v in broker_configs.items() if k in DYNAMIC_LOG_CONFIGS}


Body = dict[str, Any]
Entry = tuple[str | None, int, bool]  # value, source, read-only


class ConfigService:
    def __init__(
        self, broker_id: int, store: GuardedStore, config: BrokerConfig, storage: LogStorage, replicas: ReplicaManager,
        served: listener_keystores.ServedIdentities | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.served = served  # the certificates this broker's listeners serve
        self.store = store
        self.config = config
        self.storage = storage
        self.replicas = replicas

    async def topic_overrides(self, name: str) -> dict[str, str]:
        return dict(await self.store.get_topic_config(require_valid_topic_name(name)))

    async def describe(self, rtype: int, rname: str) -> dict[str, Entry]:
        return {k: (v[0], v[1], v[2]) for k, v in (await self.describe_with_synonyms(rtype, rname)).items()}

    async def describe_with_synonyms(self, rtype: int, rname: str) -> dict[str, tuple[str | None, int, bool, list[Synonym]]]:
        """name -> (value, source, read-only, synonyms): the synonyms in Kafka's order of
        precedence (DescribeConfigs v1+ include_synonyms): for a topic, its own override,
        then the broker setting(s) it defaults to; for a broker, the dynamic per-broker
        value, the dynamic cluster default, server.properties, the built-in default."""
        cfg = self.config
        props = cfg.as_props()
        if rtype == RESOURCE_TOPIC:
            require_valid_topic_name(rname)
            if not await self.store.topic_exists(rname):
                raise KafkaError(f"Topic '{rname}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            overrides = await self.topic_overrides(rname)
            dynamic = ((await self.store.get_broker_config(self.broker_id), CONFIG_SOURCE_DYNAMIC_BROKER),
                       (await self.store.get_broker_config(), CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER))
            out: dict[str, tuple[str | None, int, bool, list[Synonym]]] = {}
            for k, v in cfg.topic_defaults().items():
                syn: list[Synonym] = [(k, overrides[k], CONFIG_SOURCE_TOPIC)] if k in overrides else []
                syn += setting_synonyms(broker_synonyms(k), dynamic, props, cfg.explicit)
                if k in overrides:
                    out[k] = (overrides[k], CONFIG_SOURCE_TOPIC, False, syn)
                elif syn and syn[0][2] in (CONFIG_SOURCE_DYNAMIC_BROKER, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER):
                    out[k] = (syn[0][1], syn[0][2], False, syn)
                else:
                    out[k] = (v, syn[0][2] if syn else CONFIG_SOURCE_DEFAULT, False, syn)
            for k, v in overrides.items():
                out.setdefault(k, (v, CONFIG_SOURCE_TOPIC, False, [(k, v, CONFIG_SOURCE_TOPIC)]))
            for k, v in TOPIC_ONLY_DEFAULTS.items():  # no broker synonym: Kafka's LogConfig default
                out.setdefault(k, (v, CONFIG_SOURCE_DEFAULT, False, []))
            return out
        if rtype == RESOURCE_BROKER:
            if rname not in ("", str(self.broker_id)):
                raise KafkaError(f"broker {rname} is not this broker", ErrorCode.INVALID_REQUEST)
            default = await self.store.get_broker_config()
            mine = await self.store.get_broker_config(self.broker_id) if rname else {}
            broker: dict[str, tuple[str | None, int, bool, list[Synonym]]] = {}
            if not rname:  # the cluster-wide default: its dynamic values only, as Kafka's
                return {k: (v, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER, False,
                            [(k, v, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER)]) for k, v in sorted(default.items())}
            for k in sorted({*props, *default, *mine, *_COARSE_GROUPS}):
                syn = setting_synonyms(_COARSE_GROUPS.get(k, (k,)), ((mine, CONFIG_SOURCE_DYNAMIC_BROKER),
                                       (default, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER)), props, cfg.explicit)
                # Its own value (null for log.retention.ms when only .hours holds one, as
                # Kafka's); the source is the synonym in force.
                value = next((v for b, v, _src in syn if b == k), None)
                read_only = (k not in DYNAMIC_BROKER_CONFIGS and k not in DYNAMIC_LOG_CONFIGS
                             and not listener_keystores.store_config(k))  # listener stores: per broker
                broker[k] = (value, syn[0][2] if syn else CONFIG_SOURCE_DEFAULT, read_only, syn)
            return broker
        raise KafkaError(f"unsupported resource type {rtype}", ErrorCode.INVALID_REQUEST)

    async def broker_overrides(self, rname: str) -> dict[str, str]:
        """Dynamic configs of broker `rname` ("" = the cluster-wide default)."""
        return dict(await self.store.get_broker_config(_broker_entity(rname)))

    async def set_broker_config(self, rname: str, new: dict[str, str], validate_only: bool) -> None:
        entity = _broker_entity(rname)
        keystore = {k for k in new if listener_keystores.store_config(k)}
        unknown = sorted(set(new) - DYNAMIC_BROKER_CONFIGS - DYNAMIC_LOG_CONFIGS.keys() - keystore)
        if unknown:
            raise KafkaError(f"cannot update these configs dynamically: {', '.join(unknown)}",
                             ErrorCode.INVALID_REQUEST)
        if keystore and rname == "":
            raise KafkaError(f"cannot update these configs at the cluster-wide default, only per broker: "
                             f"{', '.join(sorted(keystore))}", ErrorCode.INVALID_REQUEST)
        new = await self._keystore_update(entity, new)
        try:
            log_config(self.config, dynamic_topic_defaults(new))
        except (ValueError, KafkaError) as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None
        for k, v in new.items():
            if k not in DYNAMIC_BROKER_CONFIGS:
                continue
            try:
                if k == "max.connections.per.ip.overrides":
                    parse_connections_per_ip_overrides(v)
                elif k == "transaction.partition.verification.enable":
                    if str(v).strip().lower() not in ("true", "false"):
                        raise ValueError
                elif k == "producer.id.expiration.ms":
                    if not 1 <= int(v) <= 2**31 - 1:
                        raise ValueError
                elif int(v) < (1 if k in ("max.connections", "max.connections.per.ip") else 0) or int(v) > 2**63 - 1:
                    raise ValueError
            except (TypeError, ValueError, ConfigError):
                raise KafkaError(f"{k}: {v!r} is not a valid value", ErrorCode.INVALID_CONFIG) from None
        if not validate_only:
            await self.store.set_broker_config(entity, new)

    async def _keystore_update(self, entity: str, new: dict[str, str]) -> dict[str, str]:
        """`new` with its listener keystore passwords encoded (those already stored stay
        as they are); on the broker they are for, the new keystores loaded and checked
        against the certificates in use (kafka-configs sends a broker's configs to it)."""
        stored = dict(await self.store.get_broker_config(entity))
        changed = {k: v for k, v in new.items() if listener_keystores.store_config(k) and stored.get(k) != v}
        gone = {k for k in stored if listener_keystores.store_config(k) and k not in new}
        if not changed and not gone:
            return new
        encoder = PasswordEncoder.of(self.config)
        try:
            out = {**new, **listener_keystores.encode(changed, encoder)}
            if entity != str(self.broker_id):
                return out
            before = listener_keystores.effective(self.config, stored, encoder)
            after = listener_keystores.effective(self.config, out, encoder)
            protocols = {spec.name.lower(): (spec.name, spec.protocol) for spec in self.config.listener_specs()}
            touched = {found[0] for k in (*changed, *gone) if (found := listener_keystores.store_config(k))}
            for listener in sorted(touched):
                if listener not in protocols:
                    raise ConfigError(f"listener {listener} is not one of this broker's")
                name, protocol = protocols[listener]
                if protocol in ("SSL", "SASL_SSL"):
                    listener_keystores.check_update(before, after, name, protocol,
                                                    name == self.config.inter_broker_listener().name,
                                                    self.served.get(name) if self.served else None)
        except ConfigError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None
        return out

    async def set_topic_config(self, name: str, new: dict[str, str], validate_only: bool) -> None:
        """Replace the topic's overrides with `new`; this broker's replicas of the topic
        take them at once (the others when their next LeaderAndIsr reads them)."""
        require_valid_topic_name(name)
        if not await self.store.topic_exists(name):
            raise KafkaError(f"Topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        validate_topic_configs(new, self.storage)
        if not validate_only:
            await self.store.set_topic_config(name, new)
            self.replicas.reconfigure_topic(name, new)


class ConfigApis:
    def __init__(self, configs: ConfigService) -> None:
        self.configs = configs

    async def describe_configs(self, req: Request) -> Body:
        results = []
        for r in req.body["resources"]:
            keys = r.get("configuration_keys")
            res: Body = {
                "error_code": 0, "error_message": None, "resource_type": r["resource_type"],
                "resource_name": r["resource_name"], "configs": [],
            }
            results.append(res)
            try:
                entries = await self.configs.describe_with_synonyms(r["resource_type"], r["resource_name"])
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
                continue
            with_synonyms = bool(req.body.get("include_synonyms"))
            with_docs = bool(req.body.get("include_documentation"))
            broker = r["resource_type"] == RESOURCE_BROKER
            for name, (value, source, read_only, syn) in sorted(entries.items()):
                if keys is not None and name not in keys:
                    continue
                # Passwords (and configs of unknown type) are never shown, as Kafka: null
                # values, synonyms' too. Topic configs have no password type.
                hidden = broker and config_is_sensitive(name, DYNAMIC_BROKER_CONFIGS)
                res["configs"].append({
                    "name": name, "value": None if hidden else value, "read_only": read_only,
                    "is_default": source == CONFIG_SOURCE_DEFAULT, "config_source": source,
                    "is_sensitive": hidden,
                    "documentation": config_documentation(name, broker, DYNAMIC_LOG_CONFIGS) if with_docs else None,
                    "config_type": broker_config_type(name) if broker else topic_config_type(name),
                    "synonyms": [{"name": n, "value": None if hidden else v, "source": s} for n, v, s in syn]
                    if with_synonyms else [],
                })
        return {"throttle_time_ms": 0, "results": results}

    async def alter_configs(self, req: Request) -> Body:
        out = []
        for r in req.body["resources"]:
            res = _result(r)
            out.append(res)
            try:
                new = {c["name"]: c["value"] for c in r["configs"] if c["value"] is not None}
                if r["resource_type"] == RESOURCE_BROKER:
                    await self.configs.set_broker_config(r["resource_name"], new, req.body.get("validate_only", False))
                    continue
                _require_topic(r)
                await self.configs.set_topic_config(r["resource_name"], new, req.body.get("validate_only", False))
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
        return {"throttle_time_ms": 0, "responses": out}

    async def incremental_alter_configs(self, req: Request) -> Body:
        out = []
        for r in req.body["resources"]:
            res = _result(r)
            out.append(res)
            try:
                broker = r["resource_type"] == RESOURCE_BROKER
                if not broker:
                    _require_topic(r)
                current = await (self.configs.broker_overrides(r["resource_name"]) if broker
                                 else self.configs.topic_overrides(r["resource_name"]))
                for c in r["configs"]:
                    op = c["config_operation"]
                    if op == OP_SET:
                        current[c["name"]] = c["value"]
                    elif op == OP_DELETE:
                        current.pop(c["name"], None)
                    else:
                        raise KafkaError("APPEND/SUBTRACT apply to list configs only", ErrorCode.INVALID_CONFIG)
                if broker:
                    await self.configs.set_broker_config(r["resource_name"], current, req.body.get("validate_only", False))
                else:
                    await self.configs.set_topic_config(r["resource_name"], current, req.body.get("validate_only", False))
            except KafkaError as exc:
                res["error_code"], res["error_message"] = int(exc.code), str(exc)
        return {"throttle_time_ms": 0, "responses": out}


def _broker_entity(rname: str) -> str:
    if rname == "":
        return "<default>"
    if not rname.isdigit():
        raise KafkaError(f"invalid broker id {rname!r}", ErrorCode.INVALID_REQUEST)
    return rname


def _result(r: Body) -> Body:
    return {"error_code": 0, "error_message": None, "resource_type": r["resource_type"], "resource_name": r["resource_name"]}


def _require_topic(r: Body) -> None:
    if r["resource_type"] != RESOURCE_TOPIC:
        raise KafkaError("only topic and broker configs can be altered", ErrorCode.INVALID_REQUEST)
