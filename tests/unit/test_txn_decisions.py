"""The transaction coordinator's decisions (coordinator/txn.py) against Kafka's
TransactionCoordinator / TransactionMetadata: epochs, KIP-360 recovery, fencing and
epoch exhaustion. Each test is a sequence the transaction model test found."""

from __future__ import annotations

from kafkarepl.coordinator.txn import MAX_EPOCH, TxnDecisions
from kafkarepl.coordinator.txn_log import TxnMetadata, TxnState
from kafkarepl.errors import ErrorCode as E

T = 1_000_000
D = TxnDecisions(max_timeout_ms=60_000)


def init(m: TxnMetadata | None, expected: tuple[int, int] | None = None, new_pid: int = 9000) -> TxnMetadata:
    pid, epoch = expected or (-1, -1)
    d = D.init_producer_id(m, "tx", 10_000, new_pid, T, pid, epoch)
    assert d.error is E.NONE and d.next is not None, d
    return d.next


def test_a_new_instance_stops_older_ones_from_recovering_through_kip_360() -> None:
    # Kafka's prepareIncrementProducerEpoch sets lastProducerEpoch to -1 for an
    # InitProducerId without an expected epoch: the instance it replaced cannot come back
    # with a KIP-360 InitProducerId naming its old epoch. It could: the last epoch was the
    # replaced one's, so the zombie got a bumped epoch and fenced the new instance.
    first = init(None)
    assert (first.producer_id, first.producer_epoch) == (9000, 0)
    second = init(first)  # a new producer instance with the same transactional.id
    assert second.producer_epoch == 1 and second.last_producer_epoch == -1
    zombie = D.init_producer_id(second, "tx", 10_000, -1, T, 9000, 0)
    assert zombie.error is E.PRODUCER_FENCED and zombie.next is None


def test_a_kip_360_retry_of_a_bump_gets_the_same_epoch_again() -> None:
    # Kafka: an expected epoch equal to the last epoch is a retry of a bump whose answer
    # was lost: the current epoch again, no new bump (it bumped once more).
    m = init(init(None))  # epoch 1
    recovered = init(m, (9000, 1))
    assert (recovered.producer_epoch, recovered.last_producer_epoch) == (2, 1)
    again = init(recovered, (9000, 1))  # the answer was lost: the same request again
    assert (again.producer_epoch, again.last_producer_epoch) == (2, 1)
    # An epoch nobody was given is not a retry (nor is -1).
    assert D.init_producer_id(recovered, "tx", 10_000, -1, T, 9000, 0).error is E.PRODUCER_FENCED
    fresh = init(None)
    assert D.init_producer_id(fresh, "tx", 10_000, -1, T, 9000, -1).error is E.PRODUCER_FENCED


def open_txn(pid: int, epoch: int) -> TxnMetadata:
    return TxnMetadata("tx", pid, epoch, 10_000, TxnState.ONGOING, {("t", 0)}, T, T, last_producer_epoch=epoch - 1)


def test_fencing_an_open_transaction_at_an_exhausted_epoch_keeps_the_producer_id() -> None:
    # Kafka's prepareFenceProducerEpoch bumps the epoch of the same producer id, up to
    # Short.MaxValue: the abort markers must carry the id the transaction's batches have.
    # At epoch 32766 the fence took a new producer id, so the markers (of that id) left the
    # open transaction open on its partitions for ever (the LSO stuck).
    m = open_txn(500, MAX_EPOCH - 1)
    d = D.init_producer_id(m, "tx", 10_000, 9000, T)
    assert d.error is E.CONCURRENT_TRANSACTIONS and d.abort_first and d.next is not None
    assert (d.next.producer_id, d.next.producer_epoch, d.next.state) == (500, MAX_EPOCH, TxnState.PREPARE_ABORT)
    assert d.next.last_producer_epoch == -1 and d.next.partitions == {("t", 0)}
    timed_out = D.timed_out_abort(m, T + 10_001)
    assert timed_out is not None and (timed_out.producer_id, timed_out.producer_epoch) == (500, MAX_EPOCH)
    # Once aborted, the next InitProducerId takes the new producer id.
    done = D.completed(d.next, T)
    rotated = init(done, new_pid=9001)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_epoch) == (9001, 0, -1)


def test_a_transaction_opened_at_short_max_is_aborted_at_that_epoch() -> None:
    # Only a client guessing the fence epoch can open one; the abort must not overflow int16.
    m = open_txn(500, MAX_EPOCH)
    nxt = D.timed_out_abort(m, T + 10_001)
    assert nxt is not None and nxt.producer_epoch == MAX_EPOCH and nxt.state is TxnState.PREPARE_ABORT


def test_end_txn_of_an_empty_transaction_is_an_invalid_state() -> None:
    # Kafka (EndTxn v0-3, before KIP-890 part 2): nothing to end, commit or abort.
    m = init(None)
    for commit in (True, False):
        d = D.end_txn(m, 9000, 0, commit, T)
        assert d.error is E.INVALID_TXN_STATE and d.next is None
