"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-612): byte rates and request time per user
and client id, connection rates per IP address; sans-I/O.

The quota configs live in ZooKeeper as Kafka keeps them (/config/users/<user>,
/config/users/<user>/clients/<client-id>, /config/clients/<client-id>, /config/ips/<ip>;
`<default>` for the default entity; names URL-encoded), written by AlterClientQuotas or
kafka-configs.sh.
This module holds what every broker caches of them and decides, per request, how long a
client must wait:

- Resolution (Kafka's DefaultQuotaCallback): for a request of user U and client id C the
  first entity that sets the quota's key wins, in this order: U+C, U+<default client>, U,
  <default user>+C, <default user>+<default client>, <default user>, C, <default client>.
  The rate is kept per matched entity, so each user (or client id) under a default quota
  has its own allowance, and all client ids of a user with a user-level quota share one.
- The rate is Kafka's `Rate` over `quota.window.num` (11) windows of
  `quota.window.size.seconds` (1 s), its elapsed time padded to at least 10 full windows:
  a client may burst 10 s worth of its quota before it is throttled.
- A request that takes the rate above the quota is still served (Produce appends); the
  answer carries throttle_time_ms = (rate - quota) / quota * window, the time for the
  average to come back to the quota, and the connection reads no request for that long
  (KIP-219). A throttled Fetch is answered empty, its bytes not counted (Kafka's
  getThrottledResponse).
- `request_percentage` (KIP-124): the time the broker's event loop spends on a client's
  requests (decoding them, their handlers' steps but not their waits, encoding the
  answers), as a percentage of one thread, is throttled the same way; requests between
  brokers and the SASL/ApiVersions handshake are exempt, as in Kafka.
- `connection_creation_rate` of an IP entity (KIP-612): a connection from an address over
  its rate is closed unserved after the throttle time (at most one window); and the
  broker-wide and per-listener max.connection.creation.rate: accepting waits the
  throttle time.
- `controller_mutation_rate` (KIP-599): partitions created or deleted per second, a token
  bucket with a burst of the quota's windows; from CreateTopics v6, CreatePartitions v3
  and DeleteTopics v5 on, a topic asked for while the bucket is empty is refused with
  THROTTLING_QUOTA_EXCEEDED; older versions are served and throttled afterwards.
"""

from __future__ import annotations

import ipaddress
import math
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT = "<default>"  # the default entity's name in ZooKeeper (null on the wire)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"  # IP entities only (KIP-612)
# key -> whether it takes whole numbers only (Kafka's LONG/INT) rather than a DOUBLE
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
    CONNECTION_CREATION_RATE: True,
}
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
# Longest entity name taken: it becomes a znode name (URL-encoded, up to 3x longer), and a
# ZooKeeper request over jute.maxbuffer would cost the broker its session's connection.
MAX_NAME_CHARS = 1024

# An entity: its components, entity type -> name (None: the default entity), sorted.
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(ValueError):
    """An entity or an op AlterClientQuotas refuses (INVALID_REQUEST)."""


def entity_of(components: Iterable[tuple[str, str | None]]) -> Entity:
    """A validated entity: user and/or client-id, each at most once; or an IP address."""
    out: dict[str, str | None] = {}
    for etype, name in components:
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unknown entity type {etype!r}")
        if etype in out:
            raise QuotaError(f"Duplicate entity type {etype!r}")
        if name is not None and not name and etype == USER:
            raise QuotaError("An empty user name is not a valid quota entity")
        if name in (".", ".."):  # URL-encoding leaves them as they are: no znode may be named so
            raise QuotaError(f"{name!r} is not a valid entity name")
        if name is not None and len(name) > MAX_NAME_CHARS:
            raise QuotaError(f"An entity name may have at most {MAX_NAME_CHARS} characters")
        if etype == IP and name is not None:
            try:
                name = str(ipaddress.ip_address(name))
            except ValueError:
                raise QuotaError(f"{name!r} is not a valid IP address") from None
        out[etype] = name
    if not out:
        raise QuotaError("An entity needs at least one component")
    if IP in out and len(out) > 1:
        raise QuotaError("An IP entity cannot be combined with a user or a client id")
    return tuple(sorted(out.items()))


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encoded (UTF-8), '*' as %2A and spaces as %20."""
    return urllib.parse.quote(name, safe="-_.")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def _znode(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _name(znode: str) -> str | None:
    return None if znode == DEFAULT else desanitize(znode)


def entity_path(entity: Entity) -> str:
    """The entity's path under /config ("users/alice/clients/app", "clients/<default>")."""
    parts = dict(entity)
    if IP in parts:
        return f"ips/{_znode(parts[IP])}"
    if USER in parts:
        path = f"users/{_znode(parts[USER])}"
        return f"{path}/clients/{_znode(parts[CLIENT_ID])}" if CLIENT_ID in parts else path
    return f"clients/{_znode(parts[CLIENT_ID])}"


def entity_from_path(path: str) -> Entity | None:
    """The entity of a /config path; None for a path that names no quota entity."""
    p = path.strip("/").split("/")
    if len(p) == 2 and p[0] == "users":
        return ((USER, _name(p[1])),)
    if len(p) == 4 and p[0] == "users" and p[2] == "clients":
        return ((CLIENT_ID, _name(p[3])), (USER, _name(p[1])))
    if len(p) == 2 and p[0] == "clients":
        return ((CLIENT_ID, _name(p[1])),)
    if len(p) == 2 and p[0] == "ips":
        return ((IP, _name(p[1])),)
    return None


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's stored config (SCRAM credentials share the user's
    znode); values that do not parse are left out."""
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                value = float(config[key])
            except ValueError:
                continue
            if math.isfinite(value) and value > 0:
                out[key] = value
    return out


def check_op(entity: Entity, key: str, value: float) -> str:
    """The stored text of a quota value, or QuotaError (Kafka: INVALID_REQUEST)."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if (key == CONNECTION_CREATION_RATE) != (entity[0][0] == IP):
        raise QuotaError(f"{key} is not a quota of {'an IP' if entity[0][0] == IP else 'a user or client id'}")
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"Configuration {key} must be a positive number, not {value}")
    if whole:
        rounded = round(value)
        top = _INT_MAX if key == CONNECTION_CREATION_RATE else _LONG_MAX
        if abs(rounded - value) > 1e-6 or rounded > top:
            raise QuotaError(f"Configuration {key} must be {'an INT' if top == _INT_MAX else 'a LONG'} value")
        return str(int(rounded))
    return repr(value)


def quota_levels(user: str, client_id: str) -> list[tuple[Entity, tuple[str, str]]]:
    """The entities that may set a quota for (user, client_id), first match winning, each
    with the key its rate is kept under (Kafka's quota metric tags)."""
    both = (user, client_id)
    return [
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]


class QuotaRate:
    """Kafka's `Rate` over `samples` windows of `window_ms`, elapsed time padded to
    `samples - 1` full windows (so a fresh sensor does not see a 1 s burst as a 10x rate)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._windows: dict[int, float] = {}  # window index -> recorded
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        w = now_ms // self.window_ms
        self._windows[w] = self._windows.get(w, 0.0) + value
        for old in [k for k in self._windows if k <= w - self.samples]:
            del self._windows[old]
        self.last_record_ms = now_ms

    def window_size_ms(self, now_ms: int) -> int:
        w = now_ms // self.window_ms
        first = min((k for k in self._windows if k > w - self.samples), default=w)
        elapsed = now_ms - first * self.window_ms
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def throttle_ms(self, limit: float, now_ms: int) -> int:
        """0 within `limit` (per second), else the time for the rate to come back to it,
        as Kafka's QuotaUtils.throttleTime: (rate - limit) / limit * the window."""
        observed = self.rate(now_ms)
        if observed <= limit:
            return 0
        if limit <= 0:
            return 2**31 - 1
        return max(1, min(round((observed - limit) / limit * self.window_size_ms(now_ms)), 2**31 - 1))

    def rate(self, now_ms: int) -> float:
        """Per second."""
        w = now_ms // self.window_ms
        total = sum(v for k, v in self._windows.items() if k > w - self.samples)
        return total * 1000.0 / self.window_size_ms(now_ms)


@dataclass(frozen=True)
class QuotaKind:
    key: str  # the config key that sets it
    name: str  # as Kafka's quota types name it (metrics)


PRODUCE = QuotaKind(PRODUCER_BYTE_RATE, "Produce")
FETCH = QuotaKind(CONSUMER_BYTE_RATE, "Fetch")
# Recorded in percent-seconds of the broker's request handling time, so that its rate
# per second is the percentage (Kafka's ClientRequestQuotaManager.nanosToPercentage).
REQUEST = QuotaKind(REQUEST_PERCENTAGE, "Request")
CONNECTION = QuotaKind(CONNECTION_CREATION_RATE, "Connection")  # per IP address
MUTATION = QuotaKind(CONTROLLER_MUTATION_RATE, "ControllerMutation")  # partitions created/deleted


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): `rate` tokens a second, at most `burst`; a mutation
    takes its partitions' worth (the balance may go negative); exceeded below 0."""

    def __init__(self, rate: float, burst: float, now_ms: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.last_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        self.tokens = min(self.burst, self.tokens + self.rate * max(0, now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms

    def exceeded(self, now_ms: int) -> bool:
        self._refill(now_ms)
        return self.tokens < 0

    def take(self, n: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens -= n

    def throttle_ms(self, now_ms: int) -> int:
        """The time until the balance is back to 0 (Kafka: -tokens / quota)."""
        self._refill(now_ms)
        return 0 if self.tokens >= 0 else min(round(-self.tokens / self.rate * 1000), 2**31 - 1)

    def full(self, now_ms: int) -> bool:
        return self.tokens + self.rate * (now_ms - self.last_ms) / 1000 >= self.burst


class ClientQuotas:
    """The quota configs this broker knows and the rates of the clients they apply to."""

    def __init__(self, clock_ms: Callable[[], int], samples: int = 11, window_s: int = 1,
                 max_connection_creation_rate: float = _INT_MAX,
                 listener_connection_rates: Mapping[str, float] | None = None) -> None:
        self.clock_ms = clock_ms
        self.samples = samples
        self.window_ms = window_s * 1000
        # KIP-612's broker-wide limit (max.connection.creation.rate), all client listeners
        self.max_connection_creation_rate = max_connection_creation_rate
        self._broker_connections = QuotaRate(samples, self.window_ms)
        # listener.name.<l>.max.connection.creation.rate: listener -> (limit, rate)
        self._listener_connections = {name: (limit, QuotaRate(samples, self.window_ms))
                                      for name, limit in (listener_connection_rates or {}).items()}
        # (user, client) -> controller mutation bucket, least recently used first
        self._buckets: OrderedDict[tuple[str, str], TokenBucket] = OrderedDict()
        self.configs: dict[Entity, dict[str, float]] = {}
        # (kind key, user, client id) -> quota(): resolved once per client until the configs
        # change (every request of every client asks once any quota exists)
        self._resolved: dict[tuple[str, str, str], tuple[float, tuple[str, str]] | None] = {}
        # (kind, user, client) -> rate, least recently recorded first
        self._rates: OrderedDict[tuple[str, str, str], QuotaRate] = OrderedDict()
        self.throttle_ms_total: dict[str, int] = {k.name: 0 for k in (PRODUCE, FETCH, REQUEST, CONNECTION, MUTATION)}  # metrics
        self.throttled: dict[str, int] = {k.name: 0 for k in (PRODUCE, FETCH, REQUEST, CONNECTION, MUTATION)}

    def metrics(self) -> dict[str, float]:
        """Throttled requests and their throttle time, broker-wide, per quota type."""
        out: dict[str, float] = {}
        for kind, n in self.throttled.items():
            out[f"kafka_server_{kind.lower()}_throttled_requests_total"] = n
            out[f"kafka_server_{kind.lower()}_throttle_time_ms_total"] = self.throttle_ms_total[kind]
        return out

    def set_config(self, entity: Entity, values: Mapping[str, float]) -> None:
        if values:
            self.configs[entity] = dict(values)
        else:
            self.configs.pop(entity, None)
        self._resolved.clear()

    def replace_all(self, configs: Mapping[Entity, Mapping[str, float]]) -> None:
        self.configs = {e: dict(v) for e, v in configs.items() if v}
        self._resolved.clear()

    @property
    def active(self) -> bool:
        return bool(self.configs)

    def quota(self, kind: QuotaKind, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """The limit (per second) and its rate key, or None when no quota applies."""
        if not self.configs:
            return None
        k = (kind.key, user, client_id)
        try:
            return self._resolved[k]
        except KeyError:
            pass
        found = None
        for entity, key in quota_levels(user, client_id):
            values = self.configs.get(entity)
            if values is not None and kind.key in values:
                found = values[kind.key], key
                break
        if len(self._resolved) >= 65536:  # made-up client ids: start over, bounded
            self._resolved.clear()
        self._resolved[k] = found
        return found

    def _rate(self, kind: QuotaKind, key: tuple[str, str], now: int) -> QuotaRate:
        # A rate unrecorded for all its windows is 0: dropping it loses nothing, and keeps
        # the memory bounded by the clients active in the last windows, however many
        # client ids a client makes up (Kafka keeps idle sensors for an hour).
        cutoff = now - self.samples * self.window_ms
        while self._rates:
            first = next(iter(self._rates.values()))
            if first.last_record_ms >= cutoff:
                break
            self._rates.popitem(last=False)
        k = (kind.name, *key)
        rate = self._rates.get(k)
        if rate is None:
            rate = self._rates[k] = QuotaRate(self.samples, self.window_ms)
        else:
            self._rates.move_to_end(k)
        return rate

    def record(self, kind: QuotaKind, user: str, client_id: str, value: float) -> int:
        """Counts `value` against the client's quota; the throttle time in ms (0: within it)."""
        q = self.quota(kind, user, client_id)
        if q is None:
            return 0
        limit, key = q
        now = self.clock_ms()
        rate = self._rate(kind, key, now)
        rate.record(value, now)
        throttle = rate.throttle_ms(limit, now)
        if throttle:
            self.note_throttle(kind, throttle)
        return throttle

    def record_only(self, kind: QuotaKind, user: str, client_id: str, value: float) -> None:
        """Counts `value` without deciding a throttle now (Kafka's recordNoThrottle): the
        client's next request sees it."""
        q = self.quota(kind, user, client_id)
        if q is not None:
            now = self.clock_ms()
            self._rate(kind, q[1], now).record(value, now)

    def note_throttle(self, kind: QuotaKind, ms: int) -> None:
        """Counts a throttled request in the metrics."""
        self.throttled[kind.name] += 1
        self.throttle_ms_total[kind.name] += ms

    def record_connection(self, ip: str) -> int:
        """A new connection from `ip`: 0 when within its connection_creation_rate, else the
        time (at most one window) after which to close it, unserved and not counted
        (Kafka's ConnectionQuotas: the client backs off and reconnects)."""
        if not self.configs:
            return 0
        limit = None
        for entity in (((IP, ip),), ((IP, None),)):
            values = self.configs.get(entity)
            if values is not None and CONNECTION.key in values:
                limit = values[CONNECTION.key]
                break
        if limit is None:
            return 0
        now = self.clock_ms()
        rate = self._rate(CONNECTION, (ip, ""), now)
        rate.record(1, now)
        throttle = min(rate.throttle_ms(limit, now), self.window_ms)
        if throttle:
            rate.record(-1, now)
            self.note_throttle(CONNECTION, throttle)
        return throttle

    def mutation_bucket(self, user: str, client_id: str) -> TokenBucket | None:
        """The controller_mutation_rate bucket of (user, client_id), None without a quota.
        Buckets that have refilled are dropped (a fresh one is the same), so memory stays
        with the clients mutating lately."""
        q = self.quota(MUTATION, user, client_id)
        now = self.clock_ms()
        while self._buckets:
            first = next(iter(self._buckets.values()))
            if not first.full(now):
                break
            self._buckets.popitem(last=False)
        if q is None:
            return None
        limit, key = q
        bucket = self._buckets.get(key)
        if bucket is None or bucket.rate != limit:
            bucket = self._buckets[key] = TokenBucket(limit, limit * self.samples * self.window_ms / 1000, now)
        self._buckets.move_to_end(key)
        return bucket

    def record_broker_connection(self, listener: str, protected: bool) -> int:
        """A new connection on `listener`: 0 within its listener's and (but for the
        inter-broker listener, `protected`) the broker's max.connection.creation.rate,
        else the ms to wait before accepting more (at most one window); it is counted
        either way, as Kafka's acceptor, which blocks that long."""
        now, wait = self.clock_ms(), 0
        limits = [self._listener_connections[listener]] if listener in self._listener_connections else []
        if not protected and self.max_connection_creation_rate < _INT_MAX:
            limits.append((self.max_connection_creation_rate, self._broker_connections))
        for limit, rate in limits:
            rate.record(1, now)
            wait = max(wait, min(rate.throttle_ms(limit, now), self.window_ms))
        return wait

    def unrecord(self, kind: QuotaKind, user: str, client_id: str, value: float) -> None:
        """Takes back a recorded value (a throttled Fetch's bytes were never sent)."""
        q = self.quota(kind, user, client_id)
        if q is not None:
            now = self.clock_ms()
            self._rate(kind, q[1], now).record(-value, now)

    def max_bytes_in_window(self, kind: QuotaKind, user: str, client_id: str) -> int | None:
        """The most one response may carry: what the quota allows over the padded
        window (Kafka's getMaxValueInQuotaWindow); None without a quota."""
        q = self.quota(kind, user, client_id)
        if q is None:
            return None
        return int(min(q[0] * (self.samples - 1) * self.window_ms / 1000, 2**31 - 1))

    # ----------------------------------------------------------- DescribeClientQuotas --
    def describe(self, components: list[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """Entities matching every filter component (match type 0: exact name, 1: the
        default entity, 2: any named or default entity); strict: no other entity types.
        Raises QuotaError for an invalid filter."""
        seen: set[str] = set()
        for etype, match_type, match in components:
            if etype in seen:
                raise QuotaError(f"Duplicate filter entity type {etype!r}")
            seen.add(etype)
            if etype not in (USER, CLIENT_ID, IP):
                raise QuotaError(f"Unknown entity type {etype!r}")
            if match_type not in (0, 1, 2):
                raise QuotaError(f"Unknown match type {match_type}")
            if match_type == 0 and match is None:
                raise QuotaError("An exact match needs a name")
        out = []
        for entity, values in sorted(self.configs.items(), key=lambda ev: repr(ev[0])):
            parts = dict(entity)
            if strict and set(parts) != seen:
                continue
            if all(etype in parts and (match_type == 2 or (match_type == 1 and parts[etype] is None)
                                       or (match_type == 0 and parts[etype] == match))
                   for etype, match_type, match in components):
                out.append((entity, values))
        return out
