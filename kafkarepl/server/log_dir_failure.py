"""What a broker does when one of its log dirs fails: an I/O error writing to it (a
log's append, roll, truncation or fsync, a checkpoint; ENOSPC, EIO, a read-only
remount) or reading a log (a fetch's or ListOffsets' lookups; EIO), reported by the
LogManager once per dir.

While other log dirs are left, that dir goes offline (KIP-112, Kafka's
handleLogDirFailure): its replicas are no longer served (KAFKA_STORAGE_ERROR), and the
broker writes /log_dir_event_notification so that the controller moves their leaders
to in-sync replicas elsewhere, which hold every acknowledged write. Nothing more is
written to or read from a disk whose state is unknown (after a failed fsync the page
cache may hold data the disk never got). The broker restarted, the dir is loaded (and
recovered) again.

Once no log dir is left, the broker halts, as Kafka's ("Shutdown broker because all log
dirs in ... have failed", then Exit.halt). The ZooKeeper session is closed first
(bounded wait): the controller sees the broker go at once instead of after
zookeeper.session.timeout.ms.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class LogDirFailureHandler:
    def __init__(self, broker_id: int, close_zk_session: Callable[[], None], *,
                 take_offline: Callable[[Path], bool] | None = None,
                 halt: Callable[[int], None] = os._exit, grace_s: float = 3.0) -> None:
        self.broker_id = broker_id
        self.close_zk_session = close_zk_session
        self.take_offline = take_offline  # schedules it (any thread); False: cannot now
        self.halt = halt
        self.grace_s = grace_s
        self._once = threading.Lock()

    def __call__(self, log_dir: Path, exc: BaseException, remaining: int = 0) -> None:
        if remaining > 0 and self.take_offline is not None and self.take_offline(log_dir):
            return
        if not self._once.acquire(blocking=False):
            return  # another dir (or thread) is already halting the broker
        log.critical("broker %d: Shutdown broker because all log dirs in %s have failed (%s: %s)",
                     self.broker_id, log_dir, type(exc).__name__, exc)
        closer = threading.Thread(target=self._close_session, name="zk-close-on-halt", daemon=True)
        closer.start()
        closer.join(self.grace_s)
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:  # noqa: BLE001 - halting regardless
                pass
        self.halt(1)

    def _close_session(self) -> None:
        try:
            self.close_zk_session()
        except Exception:  # noqa: BLE001 - halting regardless
            log.exception("closing the ZooKeeper session before halting failed")
