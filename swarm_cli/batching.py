"""How many IDs go in one call when the batch size is ``auto``.

EC2 keeps two buckets per action: one token per call, one per instance. A
call that carries more IDs spends the call bucket more slowly, so the bigger
the batch the less that bucket limits; but a batch needs all its instance
tokens at once, so too big a batch waits for the instance bucket to refill
and wastes the calls it could have made meanwhile.

``auto`` sizes calls to carry about ``seconds`` (half a second) of the IDs the
pair has been getting through since throttles showed its limit: once the
instance bucket is the limit, calls leave about twice a second, well under any
call bucket EC2 documents (2 to 5 calls a second for instance actions), which
is left to the account's other clients. Before any throttle the size stays at
what the action's documented rates give, unless the window is already as wide
as it may be, when only bigger calls can go faster.

What the API allows (IDs per call, the documented instance rate) is handed in by
the action that the run is built for (:class:`CallLimits`): batching knows no cloud.
"""

from __future__ import annotations

import math
from typing import Protocol

from .window import Control

AUTO_SECONDS = 0.5
AUTO_MOST = 1000  # the most IDs per call when no limits are handed in
AUTO_EVERY = 1.0  # seconds between changes of size
WITHOUT_INSTANCE_BUCKET = 10  # an action whose calls do not spend instance tokens


class CallLimits(Protocol):
    """What batching reads of an action's limits; the action's own limits hand it in."""

    @property
    def per_call(self) -> int:
        """The most IDs one call may carry."""
        ...

    @property
    def instance_rate(self) -> float | None:
        """The documented instances per second; None when calls spend no instance tokens."""
        ...


def initial_size(limits: CallLimits, seconds: float = AUTO_SECONDS) -> int:
    """The size to start with: ``seconds`` of the documented instance rate."""
    if limits.instance_rate is None:
        return min(limits.per_call, WITHOUT_INSTANCE_BUCKET)
    return max(1, min(limits.per_call, math.ceil(limits.instance_rate * seconds)))


class AutoBatch:
    """The batch size of one pair, from what its window has measured."""

    def __init__(
        self,
        initial: int,
        limits: CallLimits | None = None,
        *,
        most: int | None = None,
        seconds: float = AUTO_SECONDS,
    ) -> None:
        """``most``: the largest size; by default what ``limits`` allow per call."""
        if most is None:
            most = AUTO_MOST if limits is None else limits.per_call
        if not 1 <= initial <= most:
            raise ValueError(f"the initial batch size must be between 1 and {most}")
        self.size = initial
        self.most = most
        self.seconds = seconds
        self._next = -math.inf

    def __repr__(self) -> str:
        return f"AutoBatch(size={self.size})"

    def update(self, window: Control, now: float) -> int:
        """The size for the next call: it changes at most once per AUTO_EVERY, by half or double."""
        if now < self._next:
            return self.size
        if window.throttled:
            target = math.floor(window.delivery(now) * self.seconds)
        elif window.cwnd >= window.profile.max_window:
            target = self.size * 2
        else:
            return self.size
        self._next = now + AUTO_EVERY
        self.size = max(1, min(self.most, self.size * 2, max(self.size // 2, target)))
        return self.size
