"""Which errors take a log dir offline (Kafka's LogDirFailureChannel, KIP-112).

Kafka fails a dir on any IOException of a write path. Here an OSError fails it too,
except the process's own resource limits (descriptors, memory): "too many open files"
after a burst of client connections says nothing of the disk, and failing every dir in
turn for it would halt a healthy broker. Such an error fails only the request that hit it.
"""

from __future__ import annotations

import errno

NOT_THE_DISK = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
# The errors of a disk or file system that a reader of files other threads may retire
# (the log cleaner) can be sure are the disk's: a missing file there is a race, not a fault.
DISK_ONLY = frozenset({errno.EIO, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def disk_error(exc: BaseException, errnos: frozenset[int] | None = None) -> OSError | None:
    """The OSError (`exc` or its cause) that fails the log dir, or None. errnos: only
    these count (default: any but NOT_THE_DISK)."""
    for e in (exc, exc.__cause__):
        if isinstance(e, OSError):
            if errnos is not None:
                return e if e.errno in errnos else None
            return None if e.errno in NOT_THE_DISK else e
    return None
