"""Leader epochs: the (epoch, end offset) answer and Kafka's end-offset rule (KIP-279).

One definition shared by the storage epoch cache (leader-epoch-checkpoint) and the
replication core's in-memory log, so both answer OffsetForLeaderEpoch identically.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEndOffset(NamedTuple):
    """Answer to "where does epoch E end?" (OffsetForLeaderEpoch, Fetch DivergingEpoch)."""

    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.epoch == UNDEFINED_EPOCH or self.end_offset == UNDEFINED_EPOCH_OFFSET


UNDEFINED = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def end_offset_for(
    epochs: Sequence[int], starts: Sequence[int], requested_epoch: int, log_end_offset: int
) -> EpochEndOffset:
    """Kafka's LeaderEpochFileCache.endOffsetFor over ascending `epochs` and their `starts`.

    - requested == UNDEFINED_EPOCH, or no entry above it (empty cache, requested > latest
      and not the latest): UNDEFINED
    - requested == latest epoch: (requested, LEO)
    - requested below every entry: (requested, start of the first entry); since Kafka 2.x
      the follower is told to truncate to where the leader's known history begins
    - otherwise: (largest epoch <= requested, start offset of the next higher epoch)
    """
    if requested_epoch == UNDEFINED_EPOCH or not epochs:
        return UNDEFINED
    if epochs[-1] == requested_epoch:
        return EpochEndOffset(requested_epoch, log_end_offset)
    higher = bisect.bisect_right(epochs, requested_epoch)
    if higher == len(epochs):
        return UNDEFINED
    if higher == 0:
        return EpochEndOffset(requested_epoch, starts[0])
    return EpochEndOffset(epochs[higher - 1], starts[higher])
