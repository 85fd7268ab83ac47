"""When the next call may leave, and how many may be in flight to carry a rate."""

from __future__ import annotations

import math


class Pacer:
    """Spreads calls out at a rate of IDs per second: the limiter decides, the engine waits."""

    def __init__(self) -> None:
        self.gap = 0.0  # seconds the last call's IDs are worth at the current rate
        self._next = -math.inf
        self._last = -math.inf
        self._size = 1
        self.binds = True  # the last call left as soon as the pace allowed

    def next_at(self) -> float:
        return self._next

    def on_send(self, now: float, size: int, rate: float) -> None:
        # Within half a gap (or 50 ms) of its time, the pace is what held it back.
        self.binds = now - self._next < max(0.05, self.gap / 2)
        self._last, self._size = now, size
        self.retime(rate)

    def retime(self, rate: float) -> None:
        """The rate changed: the next call leaves a gap at the new rate after the last."""
        self.gap = self._size / rate if rate > 0 else 0.0
        self._next = self._last + self.gap

    def sooner(self, at: float) -> None:
        """The next call may leave as early as ``at``."""
        self._next = min(self._next, at)

    def hold(self, until: float) -> None:
        """Nothing leaves before ``until``."""
        self._next = max(self._next, until)

    def reset(self) -> None:
        self.gap, self._next, self._last, self.binds = 0.0, -math.inf, -math.inf, True


def cap_for(rate: float, rtt: float, size: int, gain: float, slack: int) -> int:
    """Calls in flight that carry ``rate`` IDs/s over a round trip, times ``gain``, plus
    ``slack``: enough that the window never holds the pace back, few enough that a hung
    endpoint never collects more."""
    return math.ceil(gain * rate * rtt / max(size, 1)) + slack


def window_bounds(
    lo: int, hi: int, min_window: int | None, max_window: int | None
) -> tuple[int, int]:
    """The bounds of calls in flight a profile keeps, with either replaced; checked."""
    lo = lo if min_window is None else min_window
    hi = hi if max_window is None else max_window
    if lo < 1:
        raise ValueError("the minimum window must be at least 1")
    if hi < lo:
        raise ValueError(f"the maximum window ({hi}) is below the minimum ({lo})")
    return lo, hi
