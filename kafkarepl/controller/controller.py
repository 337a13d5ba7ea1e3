"""The controller: runs in every broker, acts only in the one that wins /controller.

Like Kafka's, it is a single event queue processed by one task: ZooKeeper watch
firings, broker requests (AlterPartition, ControlledShutdown, ElectLeaders,
AlterPartitionReassignments) and timers become events, so the controller's state
(`ControllerContext`) is only touched by one coroutine at a time.

Fencing: every ZooKeeper write of the active controller is
multi(check(/controller_epoch, fence.zk_version), write) through KafkaZkStore, and every
request to brokers carries controller_epoch. A write rejected by the check means
another controller was elected: this one resigns at once.

This class keeps the event queue, winning and losing the election, failover, broker and
topic membership, and sending requests. The rest is done by services it wires, each
given what it uses (the context, the store, fenced state writes, the request batch
sender): PartitionStateMachine, TopicDeletionManager, ReassignmentManager,
AlterPartitionHandler, ControlledShutdown, ReplicaElection and LogDirFailureHandler.
Their methods only ever run as events of this queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    SessionExpiredError,
)

from kafkarepl.aio import wait_event
from kafkarepl.controller.alter_partition import AlterPartitionHandler
from kafkarepl.controller.channel import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    BrokerChannel,
)
from kafkarepl.controller.config import DEFAULTS, as_bool
from kafkarepl.controller.context import (
    ControllerContext,
    ControllerMetrics,
    TopicPartition,
)
from kafkarepl.controller.controlled_shutdown import ControlledShutdown
from kafkarepl.controller.log_dir_failure import LogDirFailureHandler
from kafkarepl.controller.partition_state import PartitionStateMachine
from kafkarepl.controller.reassignment import ReassignmentManager
from kafkarepl.controller.replica_election import ReplicaElection
from kafkarepl.controller.requests import RequestBatch
from kafkarepl.controller.scope import ControllerScope
from kafkarepl.controller.topic_deletion import TopicDeletionManager
from kafkarepl.errors import ErrorCode, KafkaError
from kafkarepl.zk.client import AsyncZk, WatchHandle
from kafkarepl.zk.store import ControllerMovedError, KafkaZkStore
from kafkarepl.zk.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONTROLLER,
    DELETE_TOPICS,
    LOG_DIR_EVENT_NOTIFICATION,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    ControllerEpochFence,
    PartitionState,
    new_topic_id,
    topic_path,
)

log = logging.getLogger(__name__)


class _NotActive(Exception):
    pass


class Controller:
    def __init__(
        self,
        broker_id: int,
        zk: AsyncZk,
        channel: BrokerChannel,
        config: Mapping[str, Any] | None = None,
        store: KafkaZkStore | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.store = store or KafkaZkStore(zk)
        self.channel = channel
        self.config = {**DEFAULTS, **(config or {})}
        self.ctx = ControllerContext()
        self.metrics = ControllerMetrics()
        self.fence: ControllerEpochFence | None = None
        self._queue: asyncio.Queue[
            tuple[str, Callable[[], Awaitable[Any]], asyncio.Future | None]
        ] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._controller_watch: WatchHandle | None = None
        self._watches: list[WatchHandle] = []
        self._topic_watches: dict[str, WatchHandle] = {}
        self._rebalance_task: asyncio.Task | None = None
        self._inflight: set[asyncio.Task] = set()
        self._stopped = False
        self._idle = asyncio.Event()
        self._idle.set()
        scope = ControllerScope(
            self.ctx, self.store, lambda: self.is_active, self._require_active,
            self._batch, self._send_batch,
        )
        self.partition_state_machine = psm = PartitionStateMachine(scope, self.metrics, self.config)
        self.log_dir_failure = LogDirFailureHandler(scope, psm.elect_offline_and_shrink_isr)
        self.topic_deletion = TopicDeletionManager(scope, self.config, self._forget_topic)
        self.reassignment = ReassignmentManager(scope, psm.write_states)
        self.alter_partition = AlterPartitionHandler(
            scope, psm.write_states, self.reassignment.maybe_complete
        )
        self.controlled_shutdown = ControlledShutdown(scope, psm.write_states)
        self.replica_election = ReplicaElection(scope, self.metrics, self.config, psm.write_states)

    # --- lifecycle -------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.fence is not None

    @property
    def epoch(self) -> int:
        return self.fence.epoch if self.fence else -1

    async def start(self) -> None:
        """Start the event loop and take part in controller elections."""
        await self.zk.until_done(self.store.ensure_layout, "cluster layout")
        self._task = asyncio.get_running_loop().create_task(self._run())
        self.zk.on_session_lost(lambda: self._enqueue("session_expired", self._on_session_expired))
        self.zk.on_session_reestablished(
            lambda: self._enqueue("reelect", self._on_controller_change)
        )
        self._controller_watch = await self.zk.data_watch(
            CONTROLLER,
            lambda data, stat: self._enqueue("controller_change", self._on_controller_change),
        )

    async def stop(self) -> None:
        """Resign (deleting /controller if still ours) and stop processing events."""
        if self._stopped:
            return
        self._stopped = True
        if self._controller_watch:
            self._controller_watch.cancel()
        fence = self.fence
        self._resign()
        if fence is not None:
            try:
                await self.store.resign_controller(fence)
            except Exception:  # noqa: BLE001 - best effort: the session ends anyway
                log.debug("resigning /controller failed", exc_info=True)
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for t in list(self._inflight):
            t.cancel()

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Until the event queue is empty and no event is running (tests, tooling)."""
        deadline = time.monotonic() + timeout
        while True:
            if not await wait_event(self._idle, max(0.01, deadline - time.monotonic())):
                raise asyncio.TimeoutError("the controller did not become idle")
            await asyncio.sleep(0.01)
            if self._idle.is_set() and self._queue.empty():
                return

    # --- the event queue -------------------------------------------------------------

    def _enqueue(
        self, name: str, fn: Callable[[], Awaitable[Any]], fut: asyncio.Future | None = None
    ) -> None:
        if self._stopped:
            if fut is not None and not fut.done():
                fut.set_exception(_NotActive())
            return
        self._idle.clear()
        self._queue.put_nowait((name, fn, fut))

    async def _call(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        fut = asyncio.get_running_loop().create_future()
        self._enqueue(name, fn, fut)
        return await fut

    async def _run(self) -> None:
        while True:
            if self._queue.empty():
                self._idle.set()
            name, fn, fut = await self._queue.get()
            self._idle.clear()
            try:
                result = await fn()
            except ControllerMovedError as e:
                log.warning(
                    "controller %d: fenced during %s: %s; resigning", self.broker_id, name, e
                )
                self._resign()
                if fut is not None and not fut.done():
                    fut.set_exception(_NotActive())
                continue
            except (ConnectionLoss, OperationTimeoutError) as e:
                # Events re-read ZooKeeper (level-triggered): run it again once connected,
                # unless the session expires first (then we resign and the rest is moot).
                log.warning(
                    "controller %d: %s interrupted (%r); will retry", self.broker_id, name, e
                )
                self._retry_when_connected(name, fn, fut)
                continue
            except SessionExpiredError:
                # Expected after a long enough partition: the session, and with it this
                # controller's epoch, ended under the event; ZooKeeper refused its writes.
                # (The session listener resigns as well; both ways are idempotent.)
                log.warning("controller %d: ZooKeeper session expired during %s; resigning",
                            self.broker_id, name)
                self._resign()
                if fut is not None and not fut.done():
                    fut.set_exception(_NotActive())
                continue
            except _NotActive as e:
                if fut is not None and not fut.done():
                    fut.set_exception(e)
                continue
            except asyncio.CancelledError:
                if fut is not None and not fut.done():
                    fut.cancel()
                raise
            except Exception as e:  # noqa: BLE001 - one bad event must not kill the controller
                log.exception("controller %d: event %s failed", self.broker_id, name)
                if fut is not None and not fut.done():
                    fut.set_exception(e)
                continue
            if fut is not None and not fut.done():
                fut.set_result(result)
            if self.is_active:
                self.ctx.update_metrics(self.metrics)

    def _retry_when_connected(
        self, name: str, fn: Callable[[], Awaitable[Any]], fut: asyncio.Future | None
    ) -> None:
        async def later() -> None:
            await self.zk.wait_connected()
            self._enqueue(name, fn, fut)

        task = asyncio.get_running_loop().create_task(later())
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    def _require_active(self) -> ControllerEpochFence:
        if self.fence is None:
            raise _NotActive()
        return self.fence

    # --- election and resignation ----------------------------------------------------

    async def _on_controller_change(self) -> None:
        stat = await self.zk.exists(CONTROLLER)
        if stat is not None:
            ours = stat.ephemeralOwner == self.zk.session_id
            if self.is_active and not ours:
                log.warning("controller %d: /controller moved; resigning", self.broker_id)
                self._resign()
            elif ours and not self.is_active:
                await self._elect()  # won earlier but the reply was lost: adopt the fence
            return
        if self.is_active:
            # /controller vanished while we think we are active: our session is gone.
            self._resign()
        await self._elect()

    async def _on_session_expired(self) -> None:
        if self.is_active:
            log.warning("controller %d: ZooKeeper session expired; resigning", self.broker_id)
        self._resign()

    async def _elect(self) -> None:
        if self._stopped or not self.zk.connected:
            return
        fence = await self.store.try_become_controller(self.broker_id)
        if fence is None:
            return
        log.info("broker %d is now the controller, epoch %d", self.broker_id, fence.epoch)
        self.fence = fence
        self.metrics.active_controller = 1
        self.metrics.controller_epoch = fence.epoch
        try:
            await self._on_failover()
        except ControllerMovedError:
            self._resign()
            raise

    def _resign(self) -> None:
        if self.fence is None and not self._watches:
            return
        self.fence = None
        self.metrics.active_controller = 0
        for h in self._watches:
            h.cancel()
        self._watches.clear()
        for h in self._topic_watches.values():
            h.cancel()
        self._topic_watches.clear()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self.channel.set_brokers({})  # queued requests of the old epoch are dropped
        self.ctx.clear()
        self.reassignment.clear()

    async def _on_failover(self) -> None:
        """Become the active controller: watch, load everything, tell every broker."""
        started = time.perf_counter()
        zk = self.zk
        # Arm the watches first, then read: changes after arming fire again.
        self._watches.append(
            await zk.children_watch(
                BROKER_IDS, lambda c: self._enqueue("broker_change", self._on_broker_change)
            )
        )
        self._watches.append(
            await zk.children_watch(
                BROKER_TOPICS, lambda c: self._enqueue("topic_change", self._on_topic_change)
            )
        )
        self._watches.append(
            await zk.children_watch(
                DELETE_TOPICS,
                lambda c: self._enqueue("topic_deletion", self.topic_deletion.on_delete_topics_change),
            )
        )
        self._watches.append(
            await zk.data_watch(
                REASSIGN_PARTITIONS,
                lambda d, s: self._enqueue("reassign_znode", self.reassignment.on_reassign_znode),
            )
        )
        self._watches.append(
            await zk.children_watch(
                LOG_DIR_EVENT_NOTIFICATION, lambda c: self._enqueue("log_dir_event", self.log_dir_failure.on_log_dir_event)
            )
        )
        self._watches.append(
            await zk.data_watch(
                PREFERRED_REPLICA_ELECTION,
                lambda d, s: self._enqueue(
                    "preferred_znode", self.replica_election.on_preferred_replica_election_znode
                ),
            )
        )
        ctx = self.ctx
        ctx.live = await self.store.get_brokers()
        self._set_channel_brokers()
        ctx.topics = await self.store.get_topics()
        for name in ctx.topics:
            await self._ensure_topic_id(name)
            await self._watch_topic(name)
        ctx.states = await self.store.get_partition_states(ctx.all_partitions())
        for name, ta in ctx.topics.items():
            for p in set(ta.adding_replicas) | set(ta.removing_replicas):
                adding = ta.adding_replicas.get(p, [])
                removing = ta.removing_replicas.get(p, [])
                full = ta.partitions.get(p, [])
                ctx.reassigning[(name, p)] = [b for b in full if b not in removing]
                ctx.reassign_origin[(name, p)] = [b for b in full if b not in adding]
        # Repair what happened while nobody was controller (leaders on dead brokers) and
        # send those changes first, small (leadership moves at once); then everyone gets
        # the full picture (per broker, requests go in the order sent).
        loaded = time.perf_counter()
        new = [tp for tp in ctx.all_partitions() if tp not in ctx.states]
        await self.partition_state_machine.on_new_partitions(new)
        await self.partition_state_machine.elect_offline_and_shrink_isr()
        elected = time.perf_counter()
        batch = self._batch()
        batch.add_update_metadata(ctx.live, ctx.all_partitions())
        batch.add_leader_and_isr_for_replicas(ctx.all_partitions())
        self._send_batch(batch)
        log.info("controller %d: %d partitions loaded in %.0f ms, repaired and sent in %.0f ms",
                 self.broker_id, len(ctx.states), (loaded - started) * 1000, (elected - loaded) * 1000)
        for name in await self.store.get_topics_to_delete():
            await self.topic_deletion.start(name)
        for tp in list(ctx.reassigning):
            await self.reassignment.maybe_complete(tp)
        self._start_rebalance_timer()
        ctx.update_metrics(self.metrics)

    def _set_channel_brokers(self) -> None:
        self.channel.set_brokers({b: (i.host, i.port) for b, i in self.ctx.live.items()})

    # --- sending -----------------------------------------------------------------------

    def _batch(self) -> RequestBatch:
        return RequestBatch(self.ctx, self.broker_id, self.epoch)

    def _send_batch(self, batch: RequestBatch) -> None:
        if self.fence is None:
            return
        for b, parts in sorted(batch.stop_replica.items()):
            body = batch.stop_replica_body(b, parts)
            self._send(b, STOP_REPLICA, body, self.topic_deletion.stop_replica_callback(b, parts))
        for b, parts in sorted(batch.leader_and_isr.items()):
            self._send(b, LEADER_AND_ISR, batch.leader_and_isr_body(b, parts), self.log_dir_failure.leader_and_isr_callback(b))
        for b, body in batch.update_metadata_bodies().items():
            self._send(b, UPDATE_METADATA, body)

    def _send(
        self, broker_id: int, api_key: int, body: dict, on_response: Callable | None = None
    ) -> None:
        # The task's first step runs in creation order, so the channel enqueues requests to
        # one broker in the order we send them.
        task = asyncio.get_running_loop().create_task(self.channel.send(broker_id, api_key, body))
        self._inflight.add(task)
        epoch = self.epoch

        def done(t: asyncio.Task) -> None:
            self._inflight.discard(t)
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None:
                log.info("controller -> broker %d api %d failed: %s", broker_id, api_key, exc)
            if on_response is not None and self.epoch == epoch:
                result = exc if exc is not None else t.result()
                self._enqueue("response", lambda: on_response(result))

        task.add_done_callback(done)

    # --- broker membership ---------------------------------------------------------------

    async def _on_broker_change(self) -> None:
        self._require_active()
        ctx = self.ctx
        current = await self.store.get_brokers()
        old = ctx.live
        dead = {b for b in old if b not in current}
        new = {b for b in current if b not in old}
        bounced = {b for b in current if b in old and current[b].epoch != old[b].epoch}
        if not (dead or new or bounced):
            ctx.live = current  # endpoint/rack updates
            return
        log.info(
            "controller: brokers dead=%s new=%s bounced=%s",
            sorted(dead),
            sorted(new),
            sorted(bounced),
        )
        if dead or bounced:
            for b in dead | bounced:
                ctx.live.pop(b, None)
                ctx.shutting_down.discard(b)
                ctx.offline_replicas.pop(b, None)  # a restart brings its log dirs back
            self._set_channel_brokers()
            await self._on_broker_failure(dead | bounced)
        ctx.live = current
        self._set_channel_brokers()
        if new or bounced:
            await self._on_broker_startup(new | bounced)

    async def _on_broker_failure(self, dead: set[int]) -> None:
        ctx = self.ctx
        affected = [
            tp
            for tp, st in ctx.states.items()
            if st.leader in dead or st.leader == -1 or any(b in dead for b in st.isr)
        ]
        batch = self._batch()
        await self.partition_state_machine.elect_offline_and_shrink_isr(affected, batch)
        batch.add_update_metadata(ctx.live)  # the live broker list changed
        self._send_batch(batch)
        self.topic_deletion.on_brokers_failed(dead)

    async def _on_broker_startup(self, new: set[int]) -> None:
        ctx = self.ctx
        batch = self._batch()
        # New brokers get everything; the others learn the new broker list.
        batch.add_update_metadata(new, ctx.all_partitions())
        batch.add_update_metadata(ctx.live)
        on_new = [tp for b in new for tp in ctx.partitions_on_broker(b) if tp in ctx.states]
        for tp in on_new:
            batch.add_leader_and_isr([b for b in ctx.replicas(tp) if b in new], tp)
        offline = [tp for tp in ctx.offline_partitions()]
        await self.partition_state_machine.elect_offline_and_shrink_isr(offline, batch)
        self._send_batch(batch)
        await self.partition_state_machine.on_new_partitions([tp for tp in ctx.all_partitions() if tp not in ctx.states])
        for name in list(ctx.deleting):
            await self.topic_deletion.resume(name)

    # --- topics ------------------------------------------------------------------------

    async def _watch_topic(self, name: str) -> None:
        if name in self._topic_watches:
            return
        self._topic_watches[name] = await self.zk.data_watch(
            topic_path(name),
            lambda d, s: self._enqueue(
                "partition_change", lambda: self._on_partition_change(name)
            ),
        )

    async def _on_topic_change(self) -> None:
        self._require_active()
        ctx = self.ctx
        names = set(await self.store.get_topic_names())
        for gone in set(ctx.topics) - names:
            self._forget_topic(gone)
        new_names = sorted(names - set(ctx.topics))
        if not new_names:
            return
        for name, ta in (await self.store.get_topics(new_names)).items():
            ctx.topics[name] = ta
            await self._ensure_topic_id(name)
            await self._watch_topic(name)
            log.info("controller: new topic %s with %d partitions", name, len(ta.partitions))
        new_tps = [tp for name in new_names for tp in ctx.partitions_of(name)]
        # A topic re-created with old state znodes left behind: pick them up.
        ctx.states.update(await self.store.get_existing_partition_states(new_names))
        await self.partition_state_machine.on_new_partitions(new_tps)

    async def _on_partition_change(self, name: str) -> None:
        self._require_active()
        ctx = self.ctx
        if name not in ctx.topics or ctx.is_deleting(name):
            return
        ta = await self.store.get_topic(name)
        if ta is None:
            return
        old = ctx.topics[name]
        added = sorted(set(ta.partitions) - set(old.partitions))
        # Keep our own in-flight reassignment view; take new partitions from ZooKeeper.
        for p in added:
            old.partitions[p] = ta.partitions[p]
        old.zk_version = ta.zk_version
        if added:
            log.info("controller: topic %s gained partitions %s", name, added)
            await self.partition_state_machine.on_new_partitions([(name, p) for p in added])

    async def _ensure_topic_id(self, name: str) -> None:
        """Topics written without a topic id (older tools) get one, as Kafka's controller does."""
        ta = self.ctx.topics[name]
        if ta.topic_id:
            return
        fence = self._require_active()
        ta.topic_id = new_topic_id()
        ta.zk_version = await self.store.set_topic_assignment(fence, ta, ta.zk_version)

    def _forget_topic(self, name: str) -> None:
        ctx = self.ctx
        for tp in ctx.partitions_of(name):
            ctx.states.pop(tp, None)
            ctx.reassigning.pop(tp, None)
            ctx.reassign_origin.pop(tp, None)
        ctx.topics.pop(name, None)
        ctx.deleting.pop(name, None)
        handle = self._topic_watches.pop(name, None)
        if handle:
            handle.cancel()

    # --- AlterPartition (ISR changes asked by leaders) ---------------------------------

    async def handle_alter_partition(self, body: dict) -> dict:
        """AlterPartition request body -> response body (v0-v3 fields)."""
        return await self._serve(
            "alter_partition", lambda: self.alter_partition.handle(body), _alter_partition_failure
        )

    # --- controlled shutdown -----------------------------------------------------------

    async def handle_controlled_shutdown(self, body: dict) -> dict:
        """ControlledShutdown request body -> response body. The broker retries until
        remaining_partitions is empty (or gives up and shuts down anyway)."""
        return await self._serve(
            "controlled_shutdown",
            lambda: self.controlled_shutdown.handle(body),
            _controlled_shutdown_failure,
        )

    # --- leader elections asked for (admin, /admin/preferred_replica_election, auto) ----

    async def handle_elect_leaders(self, body: dict) -> dict:
        """ElectLeaders request body (v0-v2) -> response body."""
        return await self._serve(
            "elect_leaders",
            lambda: self.replica_election.elect_leaders(body),
            _elect_leaders_failure,
        )

    def _start_rebalance_timer(self) -> None:
        if not as_bool(self.config["auto.leader.rebalance.enable"]):
            return
        interval = float(self.config["leader.imbalance.check.interval.seconds"])

        async def tick() -> None:
            while True:
                await asyncio.sleep(interval)
                self._enqueue("auto_rebalance", self.replica_election.auto_rebalance)

        self._rebalance_task = asyncio.get_running_loop().create_task(tick())

    async def trigger_auto_rebalance(self) -> None:
        """Run one auto-rebalance check now (tests, admin tooling)."""
        await self._call("auto_rebalance", self.replica_election.auto_rebalance)

    # --- partition reassignment --------------------------------------------------------

    async def handle_alter_partition_reassignments(self, body: dict) -> dict:
        """AlterPartitionReassignments request body -> response body. replicas None
        cancels a reassignment in progress."""
        return await self._serve(
            "alter_reassignments", lambda: self.reassignment.alter(body), _reassignments_failure
        )

    def list_partition_reassignments(
        self,
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """{tp: (replicas, adding, removing)} of reassignments in progress."""
        return self.reassignment.in_progress()

    # --- helpers for tests and the broker ------------------------------------------------

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.ctx.states.get((topic, partition))

    async def refresh(self) -> None:
        """Re-run every membership/topic check now (after a missed watch, in tests)."""
        self._enqueue("broker_change", self._on_broker_change)
        self._enqueue("topic_change", self._on_topic_change)
        self._enqueue("topic_deletion", self.topic_deletion.on_delete_topics_change)
        await self.wait_idle()

    # --- serving broker requests -------------------------------------------------------

    async def _serve(
        self, name: str, fn: Callable[[], Awaitable[dict]], failure: Callable[[ErrorCode], dict]
    ) -> dict:
        """Run a request as a controller event; answer NOT_CONTROLLER when not (or no
        longer) active, INVALID_REQUEST for a malformed body, never raise."""
        if not self.is_active:
            return failure(ErrorCode.NOT_CONTROLLER)
        try:
            return await self._call(name, fn)
        except _NotActive:
            return failure(ErrorCode.NOT_CONTROLLER)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            log.warning("controller: malformed %s request: %r", name, e)
            return failure(ErrorCode.INVALID_REQUEST)
        except KazooException as e:
            # ZooKeeper unreachable right now: retriable for the caller.
            log.warning("controller: %s failed on ZooKeeper: %r", name, e)
            return failure(ErrorCode.NOT_CONTROLLER)
        except KafkaError as e:
            return failure(e.code)
        except Exception:  # noqa: BLE001 - the broker's handler must always get an answer
            log.exception("controller: %s failed", name)
            return failure(ErrorCode.UNKNOWN_SERVER_ERROR)


def _alter_partition_failure(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "topics": []}


def _controlled_shutdown_failure(code: ErrorCode) -> dict:
    return {"error_code": int(code), "remaining_partitions": []}


def _elect_leaders_failure(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "replica_election_results": []}


def _reassignments_failure(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "responses": []}
