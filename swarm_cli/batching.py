"""How many IDs go in one call when the batch size is ``auto``.

EC2 keeps two buckets per action: one token per call, one per instance. A
call that carries more IDs spends the call bucket more slowly, so the bigger
the batch the less that bucket limits; but a batch needs all its instance
tokens at once, so too big a batch waits for the instance bucket to refill
and wastes the calls it could have made meanwhile.

``auto`` starts at the larger of two sizes from the action's documented limits: half
a second of its instance rate, and the size that spends both bursts together (the
instance burst over the call burst: StartInstances holds 1000 instance tokens but 5
call tokens, so calls of one ID would spend its burst at 2 IDs a second). An action
that spends no instance token takes as many IDs as a call takes. It never goes below
half a second of the instance rate: calls smaller than that spend the call bucket
faster for the same IDs, and where the call bucket is the tighter one (what the
account's other clients leave of it), smaller calls get fewer IDs through, which
would size the next calls smaller still. Before any throttle it doubles each time the
window doubles, so that both buckets' bursts are spent in as few round trips as they
allow. Once throttles show the limit, it moves toward what gets through in the time
that lets calls leave at half the documented call refill (half a second, or a second
for StartInstances' 2 calls a second), so the call bucket stays free for the
account's other clients; it grows only while calls of its size mostly get through,
and halves when most of them are throttled: a call may need more instance tokens than
the bucket holds for it, and a size that proved too big is not tried again.

What the API allows (IDs per call, the documented buckets) is handed in by the action
that the run is built for (:class:`CallLimits`): batching knows no cloud.
"""

from __future__ import annotations

import math
from typing import Protocol

from .window import Control

AUTO_SECONDS = 0.5
AUTO_MOST = 1000  # the most IDs per call when no limits are handed in
AUTO_EVERY = 1.0  # seconds between changes of size
MIN_ANSWERS = 4  # answers to calls of a size before it changes, once throttled
TOO_BIG_SHARE = 0.5  # more of those throttled: the size is too big
GROW_SHARE = 0.2  # this share or more throttled: the size does not grow
NONE_THROUGH = 16  # calls of the smallest size throttled, none through: it goes below


class BucketLimit(Protocol):
    """One documented bucket: ``burst`` tokens, ``rate`` per second."""

    @property
    def burst(self) -> float: ...

    @property
    def rate(self) -> float: ...


class CallLimits(Protocol):
    """What batching reads of an action's limits; the action's own limits hand it in."""

    @property
    def per_call(self) -> int:
        """The most IDs one call may carry."""
        ...

    @property
    def calls(self) -> BucketLimit:
        """The documented call bucket."""
        ...

    @property
    def instances(self) -> BucketLimit | None:
        """The documented instance bucket; None when calls spend no instance tokens."""
        ...


def least_size(limits: CallLimits, seconds: float = AUTO_SECONDS) -> int:
    """The size never gone below: ``seconds`` of the documented instance rate. Calls that
    spend no instance token (RebootInstances, CreateTags) have only the call bucket to
    spend: as full as a call may be, from the first, and never smaller (half a second of
    what gets through would size them by their own small size)."""
    if limits.instances is None:
        return limits.per_call
    return max(1, min(limits.per_call, math.ceil(limits.instances.rate * seconds)))


def initial_size(limits: CallLimits, seconds: float = AUTO_SECONDS) -> int:
    """The size to start with: the least, or what spends both bursts together (the
    instance burst over the call burst) where that is more."""
    least = least_size(limits, seconds)
    if limits.instances is None:
        return least
    both = math.ceil(limits.instances.burst / max(limits.calls.burst, 1.0))
    return max(least, min(limits.per_call, both))


def steady_seconds(limits: CallLimits | None) -> float:
    """Seconds of what gets through that one call carries once throttles show the limit:
    so that calls leave at half the documented call refill at most (twice a second for
    EC2's 5 calls a second, once a second for StartInstances' 2)."""
    if limits is None:
        return AUTO_SECONDS
    return max(AUTO_SECONDS, 2.0 / limits.calls.rate)


class AutoBatch:
    """The batch size of one pair, from what its window has measured (see the module)."""

    def __init__(
        self,
        initial: int,
        limits: CallLimits | None = None,
        *,
        most: int | None = None,
        seconds: float | None = None,
    ) -> None:
        """``most``: the largest size; by default what ``limits`` allow per call.
        ``seconds``: of what gets through, per call once throttled; by default
        :func:`steady_seconds`."""
        if most is None:
            most = AUTO_MOST if limits is None else limits.per_call
        if not 1 <= initial <= most:
            raise ValueError(f"the initial batch size must be between 1 and {most}")
        self.size = initial
        # Never below half a second of the instance rate, even where the start was more.
        self.least = initial if limits is None else min(initial, least_size(limits))
        self.most = most
        self.seconds = steady_seconds(limits) if seconds is None else seconds
        self._next = -math.inf
        self._changed_at = -math.inf
        self._opened_at: float | None = None  # the window when the size last grew with it
        self._answers = 0  # calls sent since the size last changed, answered
        self._throttles = 0  # of which throttled

    def __repr__(self) -> str:
        return f"AutoBatch(size={self.size})"

    def on_answer(self, sent_at: float, throttled: bool) -> None:
        """A call sent at ``sent_at`` was answered: throttled, or not."""
        if sent_at >= self._changed_at:
            self._answers += 1
            self._throttles += throttled

    def update(self, window: Control, now: float) -> int:
        """The size for the next call."""
        if not window.throttled:
            cwnd = float(window.cwnd)
            if self._opened_at is None or cwnd < self._opened_at:
                self._opened_at = max(cwnd, 2.0)
            elif cwnd >= 2 * self._opened_at:
                self._opened_at = cwnd
                return self._resize(self.size * 2, now)
            if now >= self._next and window.cwnd >= window.profile.max_window:
                return self._resize(self.size * 2, now)
            return self.size
        if now < self._next or self._answers < MIN_ANSWERS:
            return self.size
        share = self._throttles / self._answers
        if share > TOO_BIG_SHARE:
            if self.size == self.least and self.least > 1:
                if self._answers < NONE_THROUGH:
                    return self.size
                if self._throttles < self._answers:  # some got through: judged afresh
                    self._answers = self._throttles = 0
                    self._next = now + AUTO_EVERY
                    return self.size
                # Not one of many calls of the smallest size got through: it needs more
                # instance tokens than the bucket holds (an account's lowered limit) and
                # would be throttled for ever. Smaller calls are what is left.
                self.least = max(1, self.least // 2)
            self.most = max(self.least, self.size // 2)
            return self._resize(self.size // 2, now)
        target = math.floor(window.delivery(now) * self.seconds)
        if target > self.size and share >= GROW_SHARE:
            return self.size
        return self._resize(max(self.size // 2, target), now)

    def _resize(self, size: int, now: float) -> int:
        size = max(self.least, min(self.most, self.size * 2, size))
        if size != self.size:
            self.size = size
            self._changed_at = now
            self._answers = self._throttles = 0
        self._next = now + AUTO_EVERY
        return self.size
