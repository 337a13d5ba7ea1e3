"""Which errors take a log dir offline (Kafka's LogDirFailureChannel, KIP-112).

As Kafka, any OSError of a write path fails the dir: once a write failed part-way, the
log's files and its in-memory state may disagree, and only a restart's recovery puts them
back in step. That includes running out of descriptors ("too many open files"); the
broker raises its own descriptor limit to the hard limit at start for that reason
(kafkarepl.cli.broker.raise_descriptor_limit), as Kafka's operators do with `ulimit -n`.
"""

from __future__ import annotations

import errno

# The errors of a disk or file system that a reader of files other threads may retire
# (the log cleaner) can be sure are the disk's: a missing file there is a race, not a fault.
DISK_ONLY = frozenset({errno.EIO, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def disk_error(exc: BaseException, errnos: frozenset[int] | None = None) -> OSError | None:
    """The OSError (`exc` or its cause) that fails the log dir, or None. errnos: only
    these count (default: any)."""
    for e in (exc, exc.__cause__):
        if isinstance(e, OSError):
            return e if errnos is None or e.errno in errnos else None
    return None
