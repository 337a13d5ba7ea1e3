"""SocketServer limits (issue 10 items 3 and 6) on real loopback sockets: frame size
checked before reading, buffers that grow only as bytes arrive, the request memory pool,
connections per IP, and failed handlers answered or closed, never left hanging."""

from __future__ import annotations

import asyncio
import socket
import struct
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from kafkarepl.errors import ErrorCode
from kafkarepl.protocol import ApiKey, decode_response, encode_request
from kafkarepl.server.network import SocketServer

HEARTBEAT = 12  # response has a top-level error_code
METADATA = 3  # response has none


def heartbeat_frame(cid: int = 7) -> bytes:
    return encode_request(HEARTBEAT, 0, cid, "t", {"group_id": "g", "generation_id": 1,
                                                    "member_id": "m"})


def metadata_frame(cid: int = 8) -> bytes:
    return encode_request(METADATA, 1, cid, "t", {"topics": None})


async def start(handler, **kw: Any) -> SocketServer:
    s = SocketServer("127.0.0.1", 0, handler, lambda exc: None, kw.pop("max_request", 1 << 20),
                     kw.pop("max_connections", 100), **kw)
    await s.start()
    return s


async def read_response(reader: asyncio.StreamReader, timeout: float = 3.0) -> bytes:
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout))[0]
    return await asyncio.wait_for(reader.readexactly(size), timeout)


async def ok_handler(req, conn) -> dict:
    return {"error_code": 0, "throttle_time_ms": 0}


class HeldHandler:
    """Records each request's correlation id and answers `answer` once `release` is set
    (only the requests `holds` says so wait)."""

    def __init__(self, answer: dict, holds: Callable[[Any], bool] = lambda req: True) -> None:
        self.answer, self.holds = answer, holds
        self.release = asyncio.Event()
        self.served: list[int] = []

    async def __call__(self, req, conn) -> dict:
        self.served.append(req.correlation_id)
        if self.holds(req):
            await self.release.wait()
        return dict(self.answer)


PRODUCE_ANSWER = {"responses": [], "throttle_time_ms": 0}


async def two_requests_held(s: SocketServer, held: HeldHandler, first: bytes, second: bytes,
                            while_held: Callable[[], None]) -> tuple[bytes, bytes]:
    """`first` (correlation id 1) and then `second` (2) sent on two connections while the
    handler holds its answers; `while_held` checks the server then; both answers come once
    released, and the pool is empty after. Stops the server."""
    r1, w1 = await asyncio.open_connection("127.0.0.1", s.port)
    r2, w2 = await asyncio.open_connection("127.0.0.1", s.port)
    w1.write(first)
    await asyncio.sleep(0.2)
    w2.write(second)
    await asyncio.sleep(0.3)
    while_held()
    held.release.set()
    answers = await read_response(r1), await read_response(r2)
    assert held.served == [1, 2]
    await asyncio.sleep(0.05)
    assert s.pool.used == 0
    w1.close()
    w2.close()
    await s.stop()
    return answers


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_failed_handler_gets_an_error_response():
    async def boom(req, conn):
        raise RuntimeError("handler bug")

    async def main():
        s = await start(boom)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(heartbeat_frame(41))
        cid, body = decode_response(HEARTBEAT, 0, await read_response(r))
        assert cid == 41 and body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        # the connection still serves
        w.write(heartbeat_frame(42))
        assert decode_response(HEARTBEAT, 0, await read_response(r))[0] == 42
        w.close()
        await s.stop()
    run(main())


def test_failed_handler_without_error_field_closes_after_earlier_responses():
    async def handler(req, conn):
        if req.api_key == METADATA:
            raise RuntimeError("handler bug")
        return {"error_code": 0}

    async def main():
        s = await start(handler)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(heartbeat_frame(1) + metadata_frame(2))
        assert decode_response(HEARTBEAT, 0, await read_response(r))[0] == 1
        assert await asyncio.wait_for(r.read(10), 3) == b""  # closed, not hanging
        await s.stop()
    run(main())


def test_unencodable_response_is_an_error_answer():
    async def handler(req, conn):
        return {"error_code": 0, "bogus": 1, "throttle_time_ms": "not an int"}

    async def main():
        s = await start(handler)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(encode_request(HEARTBEAT, 1, 5, "t", {"group_id": "g", "generation_id": 1,
                                                        "member_id": "m"}))
        cid, body = decode_response(HEARTBEAT, 1, await read_response(r))
        assert cid == 5 and body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        w.close()
        await s.stop()
    run(main())


def test_oversized_frame_closed_before_reading():
    async def main():
        s = await start(ok_handler, max_request=1000)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(struct.pack(">i", 1001))
        assert await asyncio.wait_for(r.read(10), 3) == b""
        await s.stop()
    run(main())


def test_announced_frame_is_not_allocated_up_front():
    """A 100 MiB size prefix followed by a trickle allocated and zeroed 100 MiB at once."""
    async def main():
        s = await start(ok_handler, max_request=200 << 20)
        socks = []
        tracemalloc.start()
        try:
            for _ in range(4):
                c = socket.create_connection(("127.0.0.1", s.port))
                c.sendall(struct.pack(">i", 100 << 20) + b"\x00" * 1000)
                socks.append(c)
            await asyncio.sleep(0.3)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20, peak
        for c in socks:
            c.close()
        await s.stop()
    run(main())


def test_request_pool_applies_backpressure():
    slow = HeldHandler({"error_code": 0}, holds=lambda req: req.correlation_id == 1)

    async def main():
        frame = heartbeat_frame(1)
        s = await start(slow, queued_max_request_bytes=len(frame) + 10)

        def waiting() -> None:
            assert slow.served == [1] and s.pool.used > 0  # the second request waits for room

        a1, a2 = await two_requests_held(s, slow, frame, heartbeat_frame(2), waiting)
        assert decode_response(HEARTBEAT, 0, a1)[0] == 1 and decode_response(HEARTBEAT, 0, a2)[0] == 2
    run(main())


def test_pool_released_when_connection_drops():
    async def slow(req, conn):
        await asyncio.sleep(0.5)
        return {"error_code": 0}

    async def main():
        s = await start(slow)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(heartbeat_frame(1) + struct.pack(">i", 5000) + b"\x00" * 10)
        await asyncio.sleep(0.2)
        assert s.pool.used == 21 + 5000  # the whole frame is reserved, not just what came
        w.close()
        for _ in range(50):
            await asyncio.sleep(0.05)
            if s.pool.used == 0:
                break
        assert s.pool.used == 0
        await s.stop()
    run(main())


@pytest.mark.parametrize("limit", [1, 3])
def test_max_connections_per_ip(limit):
    async def main():
        s = await start(ok_handler, max_connections_per_ip=limit)
        conns = [await asyncio.open_connection("127.0.0.1", s.port) for _ in range(limit)]
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        assert await asyncio.wait_for(r.read(10), 3) == b""  # refused
        for cr, cw in conns:  # the first ones still served
            cw.write(heartbeat_frame(3))
            assert decode_response(HEARTBEAT, 0, await read_response(cr))[0] == 3
        conns[0][1].close()
        await asyncio.sleep(0.2)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)  # room again
        w.write(heartbeat_frame(4))
        assert decode_response(HEARTBEAT, 0, await read_response(r))[0] == 4
        await s.stop()
    run(main())


def test_handler_runs_with_a_fresh_decompression_budget():
    from kafkarepl.storage.validation import current_budget

    budgets = []

    async def handler(req, conn):
        b = current_budget()
        b.used += 10
        budgets.append((b.limit, b.used))
        return {"error_code": 0}

    async def main():
        s = await start(handler, max_decompressed_request_bytes=12345)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(heartbeat_frame(1) + heartbeat_frame(2))
        await read_response(r)
        await read_response(r)
        assert budgets == [(12345, 10), (12345, 10)]
        await s.stop()
    run(main())


def test_a_connection_torn_down_with_a_request_in_flight_leaves_no_task_error():
    """A broker stopping (or a connection failing) while a handler still runs: the
    connection's teardown releases the request's memory; its writer, cancelled while
    waiting for that answer, neither pops an empty queue ("Task exception was never
    retrieved") nor releases the memory twice."""
    import gc

    async def slow(req, conn):
        await asyncio.sleep(30)
        return {"error_code": 0}

    async def main():
        errors: list[dict] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
        s = await start(slow)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(heartbeat_frame(1) + heartbeat_frame(2))
        await asyncio.sleep(0.2)
        assert s.pool.used > 0
        await s.stop()
        await asyncio.sleep(0.1)
        gc.collect()
        await asyncio.sleep(0)
        assert s.pool.used == 0
        assert not errors, errors
        w.close()
    run(main())


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """True when the server closes the connection within `seconds`."""
    try:
        return await asyncio.wait_for(reader.read(1 << 20), seconds) == b""
    except asyncio.TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_idle_connection_closed_after_connections_max_idle_ms():
    """Kafka's connections.max.idle.ms: silent connections, and one that stopped in the
    middle of a frame (which held its pool bytes), are closed; busy ones are not."""
    async def main():
        s = await start(ok_handler, connections_max_idle_ms=400)
        r1, w1 = await asyncio.open_connection("127.0.0.1", s.port)  # never sends
        r2, w2 = await asyncio.open_connection("127.0.0.1", s.port)  # half a frame, then stops
        w2.write(heartbeat_frame(1)[:10])
        r3, w3 = await asyncio.open_connection("127.0.0.1", s.port)  # asks every 100 ms
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        for i in range(15):
            w3.write(heartbeat_frame(i))
            assert decode_response(HEARTBEAT, 0, await read_response(r3))[0] == i
            await asyncio.sleep(0.1)
        assert loop.time() - t0 > 1.2  # three idle periods, and r3 was served all along
        assert await closed_within(r1, 3) and await closed_within(r2, 3)
        assert s.pool.used == 0 and len(s.connections) == 1
        await s.stop()
    run(main())


def test_connection_that_never_reads_its_answers_is_closed_when_idle():
    """A client that stops reading blocks its connection's writer for good; no byte moves
    either way, so idle expiry closes it and its queued requests' memory comes back."""
    big = {"brokers": [{"node_id": i, "host": "h" * 200, "port": 1, "rack": None}
                       for i in range(5000)], "topics": [], "controller_id": 0}

    async def handler(req, conn):
        return dict(big)

    async def main():
        s = await start(handler, connections_max_idle_ms=300)
        c = socket.create_connection(("127.0.0.1", s.port))
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.sendall(b"".join(metadata_frame(i) for i in range(40)))  # ~40 MiB of answers
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not s.pool.used and loop.time() < deadline:  # accepted, answers stuck
            await asyncio.sleep(0.01)
        assert s.connections and s.pool.used
        while s.connections and loop.time() < deadline:
            await asyncio.sleep(0.05)
        assert not s.connections and s.pool.used == 0
        c.close()
        await s.stop()
    run(main())


def test_negative_connections_max_idle_ms_never_closes():
    async def main():
        s = await start(ok_handler, connections_max_idle_ms=-1)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        assert not await closed_within(r, 0.5)
        w.write(heartbeat_frame(9))
        assert decode_response(HEARTBEAT, 0, await read_response(r))[0] == 9
        await s.stop()
    run(main())


def _produce_frame(partitions: int, cid: int = 9) -> bytes:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": b"x"} for i in range(partitions)]}]}
    return encode_request(ApiKey.PRODUCE, 7, cid, "c", body)


def test_a_small_frame_with_many_entries_is_decoded_on_the_codec_thread(monkeypatch):
    # A decode's cost grows with the entries a client puts in the frame, not its bytes: a
    # 20 KB Produce of 2,000 one-byte partitions costs what 2,000 real ones do. The event
    # loop decodes inline under an entry budget and hands such a frame to the codec
    # thread; an ordinary one stays on the loop (no thread hop).
    import threading

    from kafkarepl.server import network

    where: list[str] = []
    real = network._decode_or_error

    def spy(frame, entry_budget=None):
        where.append(threading.current_thread().name)
        return real(frame, entry_budget)

    monkeypatch.setattr(network, "_decode_or_error", spy)
    partitions: list[int] = []

    async def handler(req, conn):
        partitions.append(len(req.body["topic_data"][0]["partition_data"]))
        return {"responses": [], "throttle_time_ms": 0}

    async def main():
        s = await start(handler)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        main_thread = threading.current_thread().name
        w.write(_produce_frame(6, 1))
        await read_response(r)
        assert where == [main_thread]
        where.clear()
        frame = _produce_frame(2000, 2)
        assert len(frame) < 64 * 1024  # not sent to the codec thread for its size
        w.write(frame)
        await read_response(r)
        assert where[0] == main_thread and where[1].startswith("request-codec"), where
        assert partitions == [6, 2000]
        w.close()
        await s.stop()
    run(main())


def test_decoded_entries_are_charged_to_the_pool_until_answered():
    # A decoded entry weighs ~1 KiB against a few bytes on the wire: the request memory
    # pool (queued.max.request.bytes) holds that too, until the answer is sent.
    from kafkarepl.server.network import DECODED_ENTRY_BYTES

    slow = HeldHandler(PRODUCE_ANSWER)
    release = slow.release

    async def main():
        s = await start(slow)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        for partitions in (6, 2000):  # decoded on the loop, then on the codec thread
            frame = _produce_frame(partitions)
            w.write(frame)
            await asyncio.sleep(0.2)
            # the frame (after its size) and its entries: the partitions and their topic
            assert s.pool.used == len(frame) - 4 + (partitions + 1) * DECODED_ENTRY_BYTES
            release.set()
            await read_response(r)
            await asyncio.sleep(0.05)
            assert s.pool.used == 0
            release.clear()
        w.close()
        await s.stop()
    run(main())


def test_a_request_over_max_request_entries_closes_its_connection():
    served: list[int] = []

    async def handler(req, conn):
        served.append(len(req.body["topic_data"][0]["partition_data"]))
        return {"responses": [], "throttle_time_ms": 0}

    async def main():
        s = await start(handler, max_request_entries=1500)
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(_produce_frame(1499))  # 1 topic + 1,499 partitions: at the limit
        await read_response(r)
        w.write(_produce_frame(1500))
        assert await closed_within(r, 2)
        assert served == [1499] and s.pool.used == 0
        r, w = await asyncio.open_connection("127.0.0.1", s.port)  # others are served
        w.write(_produce_frame(3))
        await read_response(r)
        w.close()
        await s.stop()
    run(main())


def test_large_decodes_wait_until_the_pool_has_room():
    # Decodes on the codec thread run one at a time, each only while the pool is not over
    # its limit: a second large request stays undecoded (its frame bytes held) until the
    # first's answer frees the pool, whatever number of connections send them.
    from kafkarepl.server.network import DECODED_ENTRY_BYTES

    slow = HeldHandler(PRODUCE_ANSWER)

    async def main():
        s = await start(slow, queued_max_request_bytes=64 * 1024)
        first, second = _produce_frame(2000, 1), _produce_frame(2000, 2)

        def waiting() -> None:
            assert slow.served == [1]
            charged = len(first) - 4 + 2001 * DECODED_ENTRY_BYTES
            # the second frame read before the first's decode was charged, or waiting to be read
            assert s.pool.used in (charged, charged + len(second) - 4), s.pool.used

        await two_requests_held(s, slow, first, second, waiting)
    run(main())


def test_a_connection_not_reading_its_answers_is_dropped_when_the_pool_is_full():
    # A client that stops reading pins what it pipelined behind its blocked answer; once
    # the pool is full every connection's next read waits on that room. Such a connection
    # (no byte of its answer out for stalled_answer_s) is closed, and the others go on.
    async def handler(req, conn):
        if req.api_key == ApiKey.FETCH:  # an answer larger than the socket buffers hold
            return {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 0, "last_stable_offset": 0,
                 "aborted_transactions": None, "records": b"x" * (32 << 20)}]}]}
        return {"responses": [], "throttle_time_ms": 0} if req.api_key == ApiKey.PRODUCE else {"error_code": 0}

    fetch = encode_request(ApiKey.FETCH, 4, 1, "c", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 30, "isolation_level": 0,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 30}]}]})

    async def main():
        s = await start(handler, queued_max_request_bytes=256 * 1024, stalled_answer_s=0.5)
        stuck = socket.create_connection(("127.0.0.1", s.port))
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # its Fetch answer cannot all go out; the Produce behind it holds ~2 MiB of the pool
        stuck.sendall(fetch + _produce_frame(2000, 2))
        await asyncio.sleep(1.0)
        assert s.pool.used > 256 * 1024
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        w.write(heartbeat_frame(3))
        assert decode_response(HEARTBEAT, 0, await read_response(r, timeout=10))[0] == 3
        assert s.pool.used < 256 * 1024
        stuck.close()
        w.close()
        await s.stop()
    run(main())


def test_a_frame_still_arriving_is_dropped_when_the_pool_is_full():
    # A frame's announced size is taken from the pool when its size prefix arrives; a client
    # trickling the body (a byte now and then keeps it from idling out) held that room
    # while others' frames waited. Under pool pressure, one arriving for stalled_answer_s is
    # dropped and the others go on.
    async def main():
        s = await start(ok_handler, queued_max_request_bytes=256 * 1024, stalled_answer_s=0.5)
        slow = socket.create_connection(("127.0.0.1", s.port))
        slow.sendall(struct.pack(">i", 200_000) + b"\x00" * 10)
        await asyncio.sleep(0.2)
        assert s.pool.used == 200_000
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        big = heartbeat_frame(4)
        big = struct.pack(">i", len(big) - 4 + 100_000) + big[4:] + b"\x00" * 100_000  # fits once slow is gone
        w.write(big)
        assert decode_response(HEARTBEAT, 0, await read_response(r, timeout=10))[0] == 4
        assert await closed_within_sock(slow, 5)
        w.close()
        await s.stop()
    run(main())


async def closed_within_sock(sock: socket.socket, seconds: float) -> bool:
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        return await asyncio.wait_for(loop.sock_recv(sock, 1), seconds) == b""
    except ConnectionResetError:
        return True
    finally:
        sock.close()
