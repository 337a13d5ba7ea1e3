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

MAX_EPOCH = 32767  # Short.MaxValue


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: the next InitProducerId takes a new
    producer id (one epoch stays in reserve for fencing an open transaction)."""
    return epoch >= MAX_EPOCH - 1


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
        recovering = expected_pid >= 0  # KIP-360: a producer recovering from an abortable error
        # Stricter than Kafka, which checks the epoch only once no transaction is open (and
        # meanwhile aborts one with an epoch bump): a zombie must not fence the live producer.
        if recovering and (expected_pid != current.producer_id or not (
                expected_epoch == current.producer_epoch
                or 0 <= expected_epoch == current.last_producer_epoch)):
            return Decision(ErrorCode.PRODUCER_FENCED)
        if current.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
        if current.state is TxnState.ONGOING:
            # A new producer instance: abort what the old one left open (fencing it with
            # an epoch bump), the client retries and then gets its epoch.
            return Decision(ErrorCode.CONCURRENT_TRANSACTIONS, self._fence(current, now_ms), abort_first=True)
        # Kafka's prepareProducerIdRotation / prepareIncrementProducerEpoch.
        nxt = current.copy()
        epoch = current.producer_epoch
        if epoch_exhausted(epoch) and (not recovering or expected_epoch == epoch):
            nxt.producer_id, nxt.producer_epoch = new_producer_id, 0
            nxt.last_producer_epoch = epoch if recovering else -1
        elif not recovering:
            # A new instance: no older one may come back through KIP-360 (last epoch -1).
            nxt.producer_epoch, nxt.last_producer_epoch = epoch + 1, -1
        elif expected_epoch == epoch:
            nxt.producer_epoch, nxt.last_producer_epoch = epoch + 1, epoch
        # else: the last epoch: a retry of a bump whose answer was lost gets that epoch again.
        nxt.state, nxt.timeout_ms, nxt.partitions, nxt.start_ms, nxt.last_update_ms = (
            TxnState.EMPTY, timeout_ms, set(), -1, now_ms)
        return Decision(ErrorCode.NONE, nxt)

    @staticmethod
    def _fence(current: TxnMetadata, now_ms: int) -> TxnMetadata:
        """Kafka's prepareFenceProducerEpoch, then the abort: PrepareAbort with epoch + 1 of
        the same producer id, whose markers end the open transaction (markers of a new id
        would leave it open). The epoch may reach Short.MaxValue: it is never handed out,
        the next InitProducerId takes a new id. Only a client guessing that epoch can open a
        transaction at it; that one is aborted at the same epoch."""
        nxt = current.copy()
        nxt.producer_epoch = min(current.producer_epoch + 1, MAX_EPOCH)
        nxt.last_producer_epoch = -1
        nxt.state, nxt.last_update_ms = TxnState.PREPARE_ABORT, now_ms
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
        # Empty included, as Kafka before KIP-890 part 2 (EndTxn v5): clients end only a
        # transaction they added something to.
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
    def timed_out_abort(current: TxnMetadata, now_ms: int) -> TxnMetadata | None:
        """An Ongoing transaction past its timeout: abort it with a bumped epoch, which
        fences the producer that let it time out (Kafka's abortTimedOutTransactions)."""
        if current.pending or current.state is not TxnState.ONGOING:
            return None
        if current.start_ms < 0 or now_ms - current.start_ms <= current.timeout_ms:
            return None
        return TxnDecisions._fence(current, now_ms)
