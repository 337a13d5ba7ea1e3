"""Fast detection of crashed brokers (issue 16).

In ZooKeeper mode a broker counts as alive while its session does, and a killed process's
session only expires after zookeeper.session.timeout.ms: until then every partition it
led stalls. But a killed process's sockets close at once, and its listener port then
refuses connections. A broker that loses a connection to another (a replica fetcher to
its leader, a request to the controller) asks this fencer to look: two connection
attempts to the other broker's advertised listener, both refused (not timed out: a
paused or partitioned broker times out or accepts, and is left to its session), prove
that no process serves it. The fencer then deletes that broker's registration (and
/controller, if its session holds it) in ZooKeeper, conditioned on the registration's
broker epoch. From there the usual path runs: the controller sees the broker leave,
elects leaders from the ISR and shrinks ISRs; a new controller is elected if it was the
controller. Nothing is elected outside the ISR, so no acknowledged write is at risk; a
wrong verdict costs what a session expiry costs (the broker re-registers: it watches
its own registration).

A refusal proves a dead process only where nothing between the two brokers answers for
it: a firewall that rejects (TCP resets) makes a live broker look dead. A fenced broker
that registers again in the same ZooKeeper session was alive all along, so the probe
lied about it: the fencer then distrusts refusals from that broker until a probe gets
through again, or for `distrust_s` after the last refusal, and leaves it to its session
as Kafka does. Without that, a rejecting partition between two live brokers made each
delete the other's registration about once a second for as long as it lasted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kafkarepl.aio import with_timeout

log = logging.getLogger(__name__)

Probe = Callable[[str, int], Awaitable[bool | None]]  # refused / accepted / neither (timed out)
Registration = tuple[str, int, int, int]  # host, port, broker epoch, ZooKeeper session


async def refuses_connections(host: str, port: int, timeout_s: float = 1.0) -> bool | None:
    """True when a TCP connect is actively refused (nothing listens there), False when it
    is accepted, None when neither is known (timed out, unreachable)."""
    try:
        _reader, writer = await with_timeout(asyncio.open_connection(host, port), timeout_s)
    except ConnectionRefusedError:
        return True
    except (OSError, asyncio.TimeoutError):
        return None
    writer.close()
    return False


class DeadBrokerFencer:
    def __init__(
        self,
        self_id: int,
        lookup: Callable[[int], Awaitable[Registration | None]],
        fence: Callable[[int, int], Awaitable[tuple[bool, bool]]],
        probe: Probe = refuses_connections,
        confirm_delay_s: float = 0.05,
        min_interval_s: float = 1.0,
        distrust_s: float = 18.0,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled  # kafkarepl.fast.failover.enable
        self.self_id = self_id
        self.lookup = lookup  # broker id -> (host, port, broker epoch, session) from ZooKeeper
        self.fence = fence  # (broker id, epoch) -> (registration deleted, controller deleted)
        self.probe = probe
        self.confirm_delay_s = confirm_delay_s
        self.min_interval_s = min_interval_s  # per broker, between looks
        self.distrust_s = distrust_s  # zookeeper.session.timeout.ms: what a distrusted broker waits
        self.clock = clock
        self._busy: set[int] = set()
        self._last: dict[int, float] = {}
        self._fenced_session: dict[int, int] = {}  # broker -> the session whose registration we deleted
        self._distrusted: dict[int, tuple[int, float]] = {}  # broker -> (session, until)
        self.fenced = 0  # brokers fenced (a metric)

    def metrics(self) -> dict[str, float]:
        """Brokers this one fenced since it started, and the brokers whose refusals it
        distrusts now (a rejecting firewall between them and this broker)."""
        now = self.clock()
        return {"kafkarepl_fast_failover_fenced_total": self.fenced,
                "kafkarepl_fast_failover_distrusted_brokers":
                    sum(1 for _session, until in self._distrusted.values() if until > now)}

    def _note_registration(self, broker_id: int, host: str, port: int, session: int) -> None:
        """Distrust a broker we fenced that is back in the same session (it was alive);
        a new process (another session) is trusted again."""
        if self._fenced_session.pop(broker_id, None) == session:
            self._distrusted[broker_id] = (session, self.clock() + self.distrust_s)
            log.warning("broker %d registered again in the ZooKeeper session it was fenced in: "
                        "%s:%d refuses connections while the broker lives (a rejecting firewall?); "
                        "its refusals are not taken as a crash until a connection gets through (or none is "
                        "refused for %.0f s)", broker_id, host, port, self.distrust_s)
        elif (distrust := self._distrusted.get(broker_id)) is not None and distrust[0] != session:
            del self._distrusted[broker_id]

    def _still_distrusted(self, broker_id: int) -> bool:
        """broker_id refused a connection: if distrusted, renew that for distrust_s; a
        distrust with no refusal for distrust_s has lapsed."""
        distrust = self._distrusted.pop(broker_id, None)
        if distrust is None or self.clock() >= distrust[1]:
            return False
        self._distrusted[broker_id] = (distrust[0], self.clock() + self.distrust_s)
        return True

    def suspect(self, broker_id: int) -> None:
        """A connection to broker_id failed or closed: look whether it is gone."""
        if not self.enabled or broker_id == self.self_id or broker_id < 0 or broker_id in self._busy:
            return
        now = self.clock()
        if now - self._last.get(broker_id, -1e9) < self.min_interval_s:
            return
        self._last[broker_id] = now
        self._busy.add(broker_id)
        asyncio.ensure_future(self._look(broker_id))

    async def _look(self, broker_id: int) -> None:
        try:
            found = await self.lookup(broker_id)
            if found is None:
                return  # not registered: already handled
            host, port, epoch, session = found
            self._note_registration(broker_id, host, port, session)
            refused = await self.probe(host, port)
            if not refused:
                if refused is False and self._distrusted.pop(broker_id, None) is not None:
                    log.info("broker %d accepts connections again: its refusals count again", broker_id)
                return
            if self._still_distrusted(broker_id):
                return  # left to its session, as Kafka does
            await asyncio.sleep(self.confirm_delay_s)
            if not await self.probe(host, port):
                return
            deleted, controller = await self.fence(broker_id, epoch)
            if deleted:
                self._fenced_session[broker_id] = session
                self.fenced += 1
                log.warning("broker %d: %s:%d refuses connections; removed its registration%s "
                            "(epoch %d) instead of waiting for its session to expire", broker_id, host, port,
                            " and its /controller" if controller else "", epoch)
        except Exception as exc:  # noqa: BLE001 - best effort: the session expiry remains
            log.info("liveness check of broker %d failed: %s", broker_id, exc)
        finally:
            self._busy.discard(broker_id)
