"""Splitting a byte stream into size-prefixed Kafka frames.

Bytes land in a chunk (a bytearray never resized or reused), so a complete frame is
returned as a writable memoryview slice of its chunk with no copy; storage may then
assign offsets in place. A frame bigger than the space left in the chunk gets a fresh
chunk sized for it, and only its already-received head is moved. Works both with
``feed(data)`` and, zero-copy from the socket, with asyncio.BufferedProtocol's
``get_buffer()`` / ``buffer_updated(n)``.
"""

from __future__ import annotations

import struct

from ..errors import InvalidRequestError

_SIZE = struct.Struct(">i")
DEFAULT_CHUNK = 256 * 1024


class FrameTooLargeError(InvalidRequestError):
    """A size prefix that is negative or above the limit (socket.request.max.bytes):
    the connection must be closed, since the stream cannot be resynchronised."""

    def __init__(self, size: int, max_frame_size: int) -> None:
        self.size = size
        self.max_frame_size = max_frame_size
        what = "negative frame size" if size < 0 else "frame size"
        super().__init__(f"{what} {size} (limit {max_frame_size}, socket.request.max.bytes)")


class FrameReader:
    def __init__(self, max_frame_size: int, chunk_size: int = DEFAULT_CHUNK) -> None:
        self.max_frame_size = max_frame_size
        self.chunk_size = chunk_size
        self._chunk = bytearray(chunk_size)
        self._view = memoryview(self._chunk)
        self._start = 0  # first byte of the frame being received
        self._end = 0    # end of received data in the chunk

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return self._end - self._start

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Writable space for the next bytes (asyncio.BufferedProtocol.get_buffer)."""
        if self._end == len(self._chunk):
            self._new_chunk(self.chunk_size)
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were written into the last get_buffer(): return complete frames."""
        self._end += nbytes
        return self._split()

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        frames: list[memoryview] = []
        src = memoryview(data)
        while src:
            buf = self.get_buffer()
            n = min(len(buf), len(src))
            buf[:n] = src[:n]
            src = src[n:]
            frames.extend(self.buffer_updated(n))
        return frames

    def _split(self) -> list[memoryview]:
        frames: list[memoryview] = []
        chunk, start, end = self._chunk, self._start, self._end
        while end - start >= 4:
            size = _SIZE.unpack_from(chunk, start)[0]
            if size < 0 or size > self.max_frame_size:
                raise FrameTooLargeError(size, self.max_frame_size)
            frame_end = start + 4 + size
            if frame_end > end:
                if frame_end > len(chunk):  # will not fit: move the head to a chunk that will
                    self._start = start
                    self._new_chunk(max(self.chunk_size, 4 + size))
                    return frames
                break
            frames.append(self._view[start + 4:frame_end])
            start = frame_end
        self._start = start
        return frames

    def _new_chunk(self, size: int) -> None:
        """Start a new chunk holding the partial frame (old chunk stays alive only while
        frames returned from it are referenced)."""
        pending = self._view[self._start:self._end]
        chunk = bytearray(max(size, len(pending)))
        chunk[:len(pending)] = pending
        self._chunk = chunk
        self._view = memoryview(chunk)
        self._start = 0
        self._end = len(pending)
