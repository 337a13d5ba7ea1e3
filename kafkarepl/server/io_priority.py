"""A thread's Linux I/O priority (ioprio_set(2), what `ionice -p` sets).

Bios a thread submits itself (sync_file_range, fsync, O_DIRECT writes) carry its I/O
priority; block schedulers that honour it (mq-deadline, bfq) dispatch the idle class only
when no other request waits. Page cache writeback by the kernel's flusher threads does not
carry it.
"""

from __future__ import annotations

import ctypes
import os
import platform

IOPRIO_CLASS_SHIFT = 13
CLASSES = {"realtime": 1, "best-effort": 2, "idle": 3}
IOPRIO_WHO_PROCESS = 1  # a thread id, for a thread
_SET_NR = {"x86_64": 251, "aarch64": 30}
_GET_NR = {"x86_64": 252, "aarch64": 31}


def parse_io_priority(text: str) -> int:
    """"idle", "best-effort:N" or "realtime:N" (N 0-7) -> the ioprio value; ValueError if
    it is none of them."""
    name, _, level_text = text.strip().partition(":")
    if name not in CLASSES:
        raise ValueError(f"unknown I/O priority class {name!r} (one of {', '.join(CLASSES)})")
    level = int(level_text) if level_text else (0 if name == "idle" else 4)
    if not 0 <= level <= 7 or (name == "idle" and level_text):
        raise ValueError(f"I/O priority {text!r}: a level 0-7 for best-effort or realtime only")
    return (CLASSES[name] << IOPRIO_CLASS_SHIFT) | level


def _syscall(numbers: dict[str, int], *args: int) -> int:
    nr = numbers.get(platform.machine())
    if nr is None:
        raise OSError(f"ioprio syscalls: unknown syscall number on {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    ret = int(libc.syscall(nr, *args))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def set_thread_io_priority(tid: int, text: str) -> None:
    """Sets thread `tid`'s I/O priority; OSError where Linux refuses or lacks it."""
    _syscall(_SET_NR, IOPRIO_WHO_PROCESS, tid, parse_io_priority(text))


def thread_io_priority(tid: int) -> int:
    """Thread `tid`'s ioprio value (class << 13 | level)."""
    return _syscall(_GET_NR, IOPRIO_WHO_PROCESS, tid)
