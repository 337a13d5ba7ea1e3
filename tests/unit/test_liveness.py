"""DeadBrokerFencer (server/liveness.py): when a refused connection counts as a crash.

The ZooKeeper side (lookup, fence) is a dict here: the rule under test is the fencer's
own, and the real path (brokers behind a rejecting firewall in network namespaces) is in
tests/integration/test_faults_network.py.
"""

from __future__ import annotations

import asyncio

from kafkarepl.server.liveness import DeadBrokerFencer


class World:
    """Registrations in ZooKeeper, what a probe of each broker sees, and a clock."""

    def __init__(self) -> None:
        self.now = 100.0
        self.czxid = 10
        self.registrations: dict[int, tuple[str, int, int, int]] = {}
        self.probe_result: dict[int, bool | None] = {}  # port -> refused / accepted / timed out
        self.fenced: list[tuple[int, int]] = []

    def register(self, broker_id: int, session: int) -> None:
        self.czxid += 1
        self.registrations[broker_id] = ("127.0.0.1", 9000 + broker_id, self.czxid, session)

    async def lookup(self, broker_id: int) -> tuple[str, int, int, int] | None:
        return self.registrations.get(broker_id)

    async def probe(self, _host: str, port: int) -> bool | None:
        return self.probe_result.get(port - 9000)

    async def fence(self, broker_id: int, epoch: int) -> tuple[bool, bool]:
        reg = self.registrations.get(broker_id)
        if reg is None or reg[2] != epoch:
            return False, False
        del self.registrations[broker_id]
        self.fenced.append((broker_id, epoch))
        return True, False

    def fencer(self) -> DeadBrokerFencer:
        return DeadBrokerFencer(1, self.lookup, self.fence, self.probe, confirm_delay_s=0,
                                min_interval_s=1.0, distrust_s=18.0, clock=lambda: self.now)

    async def fenced_and_back(self, f: DeadBrokerFencer, broker_id: int, session: int) -> None:
        """broker_id refuses connections, is fenced, registers again in the same session
        (alive behind a rejecting firewall), and is looked at once more: distrusted."""
        self.register(broker_id, session)
        self.probe_result[broker_id] = True
        await self.suspect(f, broker_id)
        self.register(broker_id, session)
        await self.suspect(f, broker_id)
        assert len(self.fenced) == 1

    async def suspect(self, f: DeadBrokerFencer, broker_id: int) -> None:
        self.now += 1.5  # past min_interval_s
        f.suspect(broker_id)
        for _ in range(10):
            await asyncio.sleep(0)


def scenario(fn):
    """A test of fn(world, fencer), run on an event loop (no functools.wraps: pytest would
    take fn's parameters for fixtures)."""
    def test() -> None:
        w = World()
        asyncio.run(fn(w, w.fencer()))

    test.__name__, test.__doc__ = fn.__name__, fn.__doc__
    return test


@scenario
async def test_a_refusing_broker_is_fenced_and_a_restarted_one_again(w: World, f: DeadBrokerFencer) -> None:
    w.register(2, session=0xA)
    w.probe_result[2] = True
    await w.suspect(f, 2)
    assert w.fenced == [(2, 11)]
    w.register(2, session=0xB)  # a new process (its own session) crashed too
    await w.suspect(f, 2)
    assert w.fenced == [(2, 11), (2, 12)], "a restarted broker's refusals must count"
    assert f.fenced == 2



@scenario
async def test_accepted_or_unanswered_probes_fence_nothing(w: World, f: DeadBrokerFencer) -> None:
    w.register(2, session=0xA)
    for result in (False, None):
        w.probe_result[2] = result
        await w.suspect(f, 2)
    assert w.fenced == []



@scenario
async def test_a_broker_back_in_its_own_session_is_left_to_it_while_refusals_go_on(w: World, f: DeadBrokerFencer) -> None:
    """A rejecting firewall: the fenced broker lived and registered again in the same
    session. Further refusals must not fence it (each did, once a second, before)."""
    w.register(2, session=0xA)
    w.probe_result[2] = True
    await w.suspect(f, 2)
    assert len(w.fenced) == 1
    w.register(2, session=0xA)  # the same live process registers again
    for _ in range(30):  # 45 s of refusals, each within distrust_s of the last
        await w.suspect(f, 2)
    assert len(w.fenced) == 1, "a broker proven alive was fenced again"
    assert f.metrics() == {"kafkarepl_fast_failover_fenced_total": 1,
                           "kafkarepl_fast_failover_distrusted_brokers": 1}
    w.now += 20  # no refusal seen for longer than distrust_s: refusals count again
    await w.suspect(f, 2)
    assert len(w.fenced) == 2



@scenario
async def test_a_connection_that_gets_through_ends_the_distrust(w: World, f: DeadBrokerFencer) -> None:
    await w.fenced_and_back(f, 2, session=0xA)
    w.probe_result[2] = None  # timed out: proves nothing either way
    await w.suspect(f, 2)
    w.probe_result[2] = True
    await w.suspect(f, 2)
    assert len(w.fenced) == 1, "a timed-out probe must not end the distrust"
    w.probe_result[2] = False  # the firewall is gone
    await w.suspect(f, 2)
    w.probe_result[2] = True  # and now the process is
    await w.suspect(f, 2)
    assert len(w.fenced) == 2



@scenario
async def test_the_same_session_crashing_later_is_left_to_its_session_but_a_new_process_is_not(w: World, f: DeadBrokerFencer) -> None:
    await w.fenced_and_back(f, 2, session=0xA)
    w.register(2, session=0xC)  # its session expired; a new process registered
    await w.suspect(f, 2)
    assert len(w.fenced) == 2

