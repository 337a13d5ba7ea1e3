"""Deliberately broken variants of the core, to prove the simulator can fail."""

from __future__ import annotations

from kafkarepl.replication import FetcherState, FetchRequest, FollowerFetcher, PartitionState


class HwTruncatingFetcher(FollowerFetcher):
    """Seed 003's follower: on becoming follower (or when lost), truncate to the HW and
    fetch without leader epochs. KIP-101 shows this loses committed data."""

    def next_request(self, now_ms: int):  # type: ignore[override]
        if self.in_flight is not None or now_ms < self.backoff_until_ms or not self.active:
            return None
        p = self.partition
        if self.state is FetcherState.TRUNCATING:
            p.log.truncate_to(p.high_watermark)
            self.state = FetcherState.FETCHING
        log = p.log
        req = FetchRequest(log.log_end_offset, -1, self.leader_epoch, log.log_start_offset)
        self.in_flight = req
        return req


class NonStrictMinIsrPartition(PartitionState):
    """Before KIP-966: the HW advances whatever the ISR size, so a lone leader commits
    (makes visible to consumers) data that its own power loss can take away."""

    def _maybe_advance_hw(self) -> bool:
        min_isr = self.config.min_insync_replicas
        self.config.min_insync_replicas = 1
        try:
            return super()._maybe_advance_hw()
        finally:
            self.config.min_insync_replicas = min_isr
