"""The transaction coordinator's decisions, sans-I/O (Kafka's TransactionCoordinator).

Each request is checked against the transactional id's metadata and, when allowed,
yields the *next* metadata to persist in `__transaction_state`. The caller
(server/txn_coordinator.py) writes it (acks=all), then `commit`s it into the cache; a
second request for the same id meanwhile answers CONCURRENT_TRANSACTIONS (`pending`).
EndTxn moves Ongoing to PrepareCommit/PrepareAbort; once every partition has its marker
the caller completes it to CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkarepl.coordinator.txn_log import TxnMetadata, TxnState
from kafkarepl.errors import ErrorCode

MAX_EPOCH = 32767  # Short.MaxValue: bump to a new producer id after it


@dataclass
class Decision:
    error: ErrorCode
    next: TxnMetadata | None = None  # the metadata to write; None: nothing to write
    abort_first: bool = False  # InitProducerId on an ongoing transaction: abort it, then retry


class TxnDecisions:
    def __init__(self, max_timeout_ms: int) -> None:
        self.max_timeout_ms = max_timeout_ms  # transaction.max.timeout.ms

    # ---------------------------------------------------------- InitProducerId -----
    def init_producer_id(self, current: TxnMetadata | None, transactional_id: str, timeout_ms: int,
                         new_producer_id: int, now_ms: int, expected_pid: int = -1,
                         expected_epoch: int = -1) -> Decision:
        """new_producer_id: an id the caller allocated (used for a new transactional id or
        when the epoch is exhausted)."""
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return Decision(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if current is None:
            return Decision(ErrorCode.NONE, TxnMetadata(transactional_id, new_producer_id, 0, timeout_ms,
                                                        TxnState.EMPTY, set(), -1, now_ms))
        if current.pending:
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected_pid >= 0:  # KIP-360: a producer recovering from an abortable error
            if expected_pid != current.producer_id or expected_epoch not in (
                    current.producer_epoch, current.last_producer_epoch):
                return Decision(ErrorCode.PRODUCER_FENCED)
        if current.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
        if current.state is TxnState.ONGOING:
            # A new producer instance: abort what the old one left open (fencing it with
            # an epoch bump), the client retries and then gets its epoch.
            nxt = self._bumped(current, new_producer_id)
            nxt.state, nxt.last_update_ms = TxnState.PREPARE_ABORT, now_ms
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS, nxt, abort_first=True)
        nxt = self._bumped(current, new_producer_id)
        nxt.state, nxt.timeout_ms, nxt.partitions, nxt.start_ms, nxt.last_update_ms = (
            TxnState.EMPTY, timeout_ms, set(), -1, now_ms)
        return Decision(ErrorCode.NONE, nxt)

    @staticmethod
    def _bumped(current: TxnMetadata, new_producer_id: int) -> TxnMetadata:
        nxt = current.copy()
        if current.producer_epoch >= MAX_EPOCH - 1:
            nxt.producer_id, nxt.producer_epoch, nxt.last_producer_epoch = new_producer_id, 0, -1
        else:
            nxt.last_producer_epoch = current.producer_epoch
            nxt.producer_epoch = current.producer_epoch + 1
        return nxt

    # ----------------------------------------------------- producer validation -----
    @staticmethod
    def _check_producer(current: TxnMetadata | None, producer_id: int, epoch: int) -> ErrorCode:
        if current is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if current.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != current.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if current.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    # ------------------------------------------------------ AddPartitionsToTxn -----
    def add_partitions(self, current: TxnMetadata | None, producer_id: int, epoch: int,
                       partitions: set[tuple[str, int]], now_ms: int) -> Decision:
        err = self._check_producer(current, producer_id, epoch)
        if err is not ErrorCode.NONE:
            return Decision(err)
        assert current is not None
        if current.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
        if current.state is TxnState.ONGOING and partitions <= current.partitions:
            return Decision(ErrorCode.NONE)  # nothing new to persist
        nxt = current.copy()
        if nxt.state is not TxnState.ONGOING:
            nxt.start_ms = now_ms
            nxt.partitions = set()
        nxt.state = TxnState.ONGOING
        nxt.partitions |= partitions
        nxt.last_update_ms = now_ms
        return Decision(ErrorCode.NONE, nxt)

    def verify_partitions(self, current: TxnMetadata | None, producer_id: int, epoch: int,
                          partitions: set[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn v4, verify_only): whether each partition is
        in the producer's ongoing transaction, so its leader may append a transactional
        batch; a late write of a finished (e.g. aborted) transaction is refused."""
        err = self._check_producer(current, producer_id, epoch)
        if err is ErrorCode.CONCURRENT_TRANSACTIONS:
            err = ErrorCode.NONE  # a state write in flight does not change the partitions
        if err is not ErrorCode.NONE:
            return dict.fromkeys(partitions, err)
        assert current is not None
        ongoing = current.state is TxnState.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in current.partitions else ErrorCode.INVALID_TXN_STATE
                for tp in partitions}

    # ------------------------------------------------------------------ EndTxn -----
    def end_txn(self, current: TxnMetadata | None, producer_id: int, epoch: int, commit: bool,
                now_ms: int) -> Decision:
        err = self._check_producer(current, producer_id, epoch)
        if err is not ErrorCode.NONE:
            return Decision(err)
        assert current is not None
        s = current.state
        if s is TxnState.ONGOING:
            nxt = current.copy()
            nxt.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            nxt.last_update_ms = now_ms
            return Decision(ErrorCode.NONE, nxt)
        if (s is TxnState.COMPLETE_COMMIT and commit) or (s is TxnState.COMPLETE_ABORT and not commit):
            return Decision(ErrorCode.NONE)  # a retry of the request that completed it
        if (s is TxnState.PREPARE_COMMIT and commit) or (s is TxnState.PREPARE_ABORT and not commit):
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
        if s is TxnState.EMPTY and not commit:
            return Decision(ErrorCode.NONE)  # nothing was added: nothing to abort
        return Decision(ErrorCode.INVALID_TXN_STATE)

    @staticmethod
    def completed(prepared: TxnMetadata, now_ms: int) -> TxnMetadata:
        """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort (markers written)."""
        nxt = prepared.copy()
        nxt.state = (TxnState.COMPLETE_COMMIT if prepared.state is TxnState.PREPARE_COMMIT
                     else TxnState.COMPLETE_ABORT)
        nxt.partitions = set()
        nxt.last_update_ms = now_ms
        return nxt

    @staticmethod
    def timed_out_abort(current: TxnMetadata, now_ms: int, new_producer_id: int) -> TxnMetadata | None:
        """An Ongoing transaction past its timeout: abort it with a bumped epoch, which
        fences the producer that let it time out (Kafka's abortTimedOutTransactions)."""
        if current.pending or current.state is not TxnState.ONGOING:
            return None
        if current.start_ms < 0 or now_ms - current.start_ms <= current.timeout_ms:
            return None
        nxt = TxnDecisions._bumped(current, new_producer_id)
        nxt.state, nxt.last_update_ms = TxnState.PREPARE_ABORT, now_ms
        return nxt
