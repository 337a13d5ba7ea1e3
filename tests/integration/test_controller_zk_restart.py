"""ZooKeeper itself restarted: a quick restart keeps every session; a long outage
expires them, and brokers and controller come back by themselves."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from kafkarepl.zk.local import LocalZooKeeper
from tests.integration.test_controller import Harness, run, settle, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def own_zookeeper(tmp_path, zookeeper):  # zookeeper: fails/skips like the shared one when missing
    zk = LocalZooKeeper(tmp_path / "zk", tick_ms=200)
    zk.start()
    yield zk
    zk.stop()


async def create_retrying(h: Harness, name: str, assignment: dict[int, list[int]]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while True:
        try:
            await h.admin.create_topic(name, assignment)
            return
        except (SessionExpiredError, ConnectionLoss):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def serving(h: Harness, topic: str):
    for x, _, _ in h.controllers.values():
        if x.is_active and x.partition_state(topic, 0) is not None:
            return x
    return None


def test_cluster_carries_on_after_zookeeper_restarts(own_zookeeper):
    zk_server = own_zookeeper

    async def main():
        async with Harness(zk_server.connect_string) as h:
            for b in (1, 2):
                await h.start_broker(b)
            c, _ = await h.start_controller(1)
            c = await h.active()
            await h.admin.create_topic("a", {0: [1, 2]})
            await wait_for(lambda: c.partition_state("a", 0))
            loop = asyncio.get_running_loop()
            # Quick restart: the server restores sessions from its snapshot, but on a
            # loaded machine a session can still expire before its client reconnects; the
            # cluster must carry on either way.
            await loop.run_in_executor(None, zk_server.restart)
            await create_retrying(h, "b", {0: [2, 1]})
            await wait_for(
                lambda: serving(h, "b"), timeout=20, what="a controller serving after restart"
            )
            # A longer outage (past the session timeout). Whether sessions survive is the
            # server's call; either way the cluster must come back: brokers (re-)registered,
            # a controller active, new topics served, old state intact.
            await loop.run_in_executor(None, zk_server.kill)
            await asyncio.sleep(2.0)
            await loop.run_in_executor(None, zk_server.start)
            # The test's own admin session may have expired too: kazoo opens a new one by
            # itself, and calls made before it is up fail, as they would for any ZK client.
            await create_retrying(h, "c", {0: [1, 2]})
            c = await wait_for(
                lambda: serving(h, "c"), timeout=20, what="a controller serving after the outage"
            )
            await wait_for(lambda: set(c.ctx.live) == {1, 2}, timeout=10, what="brokers registered")
            await settle(c)
            st = await h.state("c", 0)
            assert st.leader in (1, 2) and (await h.state("a", 0)).leader in (1, 2)

    run(main(), timeout=90)
