"""The congestion window: how many calls may be in flight at once.

Pure state machine. Time and measurements come in as arguments; nothing here
sleeps, locks or reads a clock, so a test can drive it call by call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

Phase = Literal["slow-start", "avoidance"]
MIN_LATENCY_WINDOW = 10.0  # seconds a lowest latency stays the reference


@dataclass(frozen=True)
class WindowProfile:
    """The constants and switches of one window behaviour."""

    name: str
    initial: float = 1.0
    ssthresh: float = 16.0
    increase: float = 5.0
    decrease: float = 0.5
    dampening: float = 0.1
    latency_gate: float = 0.1
    min_window: int = 1
    max_window: int = 500
    # Gate = max(latency_gate, relative_gate * lowest latency seen); None keeps it fixed.
    relative_gate: float | None = None
    # Ignore throttles answering calls sent before the last decrease (TCP's recovery point).
    once_per_round_trip: bool = False
    # Grow only while at least half the window is in use.
    require_use: bool = False
    # On loss, ssthresh becomes half the window (TCP Reno) instead of staying put.
    reno_ssthresh: bool = False
    # Once a throttle has shown where the limit is, probe more gently; None keeps ``increase``.
    increase_after_throttle: float | None = None
    # Below the floor: throttled at min_window, space the sends out instead (a window
    # under one call). The gap doubles per such throttle and shrinks by ``pace_relief``
    # per success until it is under half a round trip, when the window takes over again.
    pacing: bool = False
    pace_relief: float = 0.9
    max_pace: float = 2.0
    # A call that got no answer (timed out, refused) shrinks the window as a throttle
    # does; False keeps the seed's rule (collapse in slow start, ignored after).
    timeout_is_congestion: bool = False

    def bounded(
        self, min_window: int | None = None, max_window: int | None = None
    ) -> WindowProfile:
        lo = self.min_window if min_window is None else min_window
        hi = self.max_window if max_window is None else max_window
        if lo < 1:
            raise ValueError("the minimum window must be at least 1")
        if hi < lo:
            raise ValueError(f"the maximum window ({hi}) is below the minimum ({lo})")
        return replace(self, min_window=lo, max_window=hi)


SEED = WindowProfile(name="seed")
ADAPTIVE = WindowProfile(
    name="adaptive",
    relative_gate=2.0,
    once_per_round_trip=True,
    require_use=True,
    reno_ssthresh=True,
    increase_after_throttle=1.0,
    pacing=True,
    timeout_is_congestion=True,
)
PROFILES: dict[str, WindowProfile] = {p.name: p for p in (SEED, ADAPTIVE)}


class Window:
    """Slow start, additive increase, multiplicative decrease.

    Every send takes a ticket (a rising number). Answers are reported with the
    ticket of the call they answer, which is how a throttle can tell whether
    its call left before or after the last decrease.
    """

    def __init__(self, profile: WindowProfile) -> None:
        self.profile = profile
        self.cwnd = self._clamp(profile.initial)
        self.ssthresh = self._clamp(profile.ssthresh)
        self.phase: Phase = "slow-start" if self.cwnd < self.ssthresh else "avoidance"
        self.min_latency = math.inf
        self._min_latency_at = -math.inf
        self.throttled = False
        self.pace = 0.0
        self._next_send = -math.inf
        self._last_change = -math.inf
        self._sent = 0
        self._recover = 0

    @property
    def recover_point(self) -> int:
        """The last ticket sent before the last decrease (0 before any)."""
        return self._recover

    @property
    def limit(self) -> int:
        """Calls allowed in flight now."""
        return max(self.profile.min_window, int(self.cwnd))

    def gate(self) -> float:
        """Latency under which a success may grow the window in avoidance."""
        p = self.profile
        if p.relative_gate is None or math.isinf(self.min_latency):
            return p.latency_gate
        return max(p.latency_gate, p.relative_gate * self.min_latency)

    def on_send(self, now: float | None = None) -> int:
        """A call leaves; returns its ticket. ``now`` is needed only while pacing."""
        self._sent += 1
        if self.pace and now is not None:
            self._next_send = now + self.pace
        return self._sent

    def send_at(self) -> float:
        """Earliest time the next call may leave (minus infinity unless pacing)."""
        return self._next_send if self.pace else -math.inf

    def _round_trip(self) -> float:
        return 0.05 if math.isinf(self.min_latency) else max(self.min_latency, 0.001)

    def on_success(self, ticket: int, latency: float, now: float, in_flight: int) -> bool:
        """A call answered without a throttle or server error. Returns True if cwnd changed.

        ``in_flight`` counts the calls outstanding when the answer came, this one included.
        """
        p = self.profile
        self._see_latency(latency, now)
        if self.pace:
            self.pace *= p.pace_relief
            if self.pace < self._round_trip() / 2:
                self.pace = 0.0
            return False
        if p.require_use and in_flight < self.cwnd / 2:
            return False
        if self.phase == "slow-start":
            # One more per answer doubles the window per round trip.
            grown = min(self.cwnd + 1, self.ssthresh, float(p.max_window))
            if grown >= self.ssthresh:
                self.phase = "avoidance"
            return self._set(grown, now)
        if latency >= self.gate() or self._dampened(now):
            return False
        step = p.increase
        if self.throttled and p.increase_after_throttle is not None:
            step = p.increase_after_throttle
        return self._set(self.cwnd + step, now)

    def _see_latency(self, latency: float, now: float) -> None:
        # The lowest latency of the last MIN_LATENCY_WINDOW seconds, as BBR keeps its min
        # RTT: a lowest-ever value would hold the gate shut for good once the API slows down.
        if latency <= self.min_latency or now - self._min_latency_at > MIN_LATENCY_WINDOW:
            self.min_latency, self._min_latency_at = latency, now

    def on_throttle(self, ticket: int, now: float) -> bool:
        """The API said slow down. Returns True if cwnd changed."""
        p = self.profile
        self.throttled = True
        if p.once_per_round_trip:
            if ticket <= self._recover:
                return False
        elif self.phase == "avoidance" and self._dampened(now):
            return False
        if p.pacing and self.cwnd <= p.min_window:
            # Even one call at a time is too many: a window below one is a gap between sends.
            self.pace = min(p.max_pace, max(self.pace * 2, self._round_trip()))
            self._next_send = max(self._next_send, now + self.pace)
            self._recover = self._sent
            return False
        if self.phase == "slow-start":
            return self._collapse(now)
        if p.reno_ssthresh:
            self.ssthresh = self._clamp(self.cwnd * p.decrease)
        return self._decrease(self.cwnd * p.decrease, now)

    def on_error(self, ticket: int, now: float) -> bool:
        """A server error or timeout. Collapses the window in slow start; ignored after."""
        if self.phase != "slow-start":
            return False
        if self.profile.once_per_round_trip and ticket <= self._recover:
            return False
        return self._collapse(now)

    def on_timeout(self, ticket: int, now: float) -> bool:
        """A call got no answer at all. Returns True if cwnd changed."""
        if not self.profile.timeout_is_congestion:
            return self.on_error(ticket, now)
        if self.profile.once_per_round_trip and ticket <= self._recover:
            return False
        if self.phase == "slow-start":
            return self._collapse(now)
        return self._decrease(self.cwnd * self.profile.decrease, now)

    def restart(self, now: float) -> None:
        """After an outage: slow start again from the initial window, pacing dropped."""
        self.pace = 0.0
        self.min_latency, self._min_latency_at = math.inf, -math.inf  # it may answer slower now
        self._recover = self._sent
        self._set(self.profile.initial, now)
        self.phase = "slow-start" if self.cwnd < self.ssthresh else "avoidance"

    def _dampened(self, now: float) -> bool:
        # A nanosecond of slack keeps sums of float steps from reading 0.1 s as 0.0999…
        return now - self._last_change < self.profile.dampening - 1e-9

    def _collapse(self, now: float) -> bool:
        if self.profile.reno_ssthresh:
            self.ssthresh = self._clamp(self.cwnd * self.profile.decrease)
        changed = self._decrease(1.0, now)
        self.phase = "slow-start" if self.cwnd < self.ssthresh else "avoidance"
        return changed

    def _decrease(self, value: float, now: float) -> bool:
        self._recover = self._sent
        return self._set(value, now)

    def _set(self, value: float, now: float) -> bool:
        value = self._clamp(value)
        # Every change, up or down, restarts the dampening interval.
        self._last_change = now
        if value == self.cwnd:
            return False
        self.cwnd = value
        return True

    def _clamp(self, value: float) -> float:
        return float(min(max(value, self.profile.min_window), self.profile.max_window))
