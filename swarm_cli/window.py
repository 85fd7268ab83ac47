"""The congestion window: how many calls may be in flight at once.

Pure state machine. Time and measurements come in as arguments; nothing here
sleeps, locks or reads a clock, so a test can drive it call by call.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Literal

from .control import Controller, ControllerProfile
from .control.pacing import window_bounds

Phase = Literal["slow-start", "avoidance", "paced"]
MIN_LATENCY_WINDOW = 10.0  # seconds a lowest latency stays the reference
# Successes over the last this many seconds give the delivery rate.
DELIVERY_SPAN = 1.0
# ... or over the last this many answers, if they took longer: a few big calls a second
# would make a one-second count jump by a whole call's IDs.
DELIVERY_CALLS = 8
DELIVERY_KEEP = 10.0  # seconds of answers kept for that
# Rate mode needs this long (and two round trips) of answers after the first throttle:
# before it, what got through still includes the bucket's burst, not only its refill.
MIN_MEASURE = 0.2


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
    # Once throttles have shown the limit, stop probing with the window: send at a
    # measured rate (instances per second), paced, as BBR does. On a throttle the rate
    # becomes ``rate_decrease`` times what got through over the last DELIVERY_SPAN;
    # every ``probe_interval`` without one it grows by ``probe_step`` of the rate found
    # (additive, so that two clients of one bucket converge to equal shares).
    # Grow above ssthresh only while the smoothed latency (not one lucky answer) is under
    # the gate: an API that queues calls answers some quickly and most slowly (TCP Vegas).
    smoothed_gate: bool = False
    # Slow start's cost is counted in round trips: where one takes longer than
    # ``scaled_start`` seconds, each answer adds one more per such span (at most 4), so
    # that a 300 ms API reaches ssthresh in two round trips instead of four. None: +1.
    scaled_start: float | None = None
    rate_mode: bool = False
    rate_decrease: float = 0.9
    probe_interval: float = 0.5
    probe_step: float = 0.05

    def bounded(
        self, min_window: int | None = None, max_window: int | None = None
    ) -> WindowProfile:
        lo, hi = window_bounds(self.min_window, self.max_window, min_window, max_window)
        return replace(self, min_window=lo, max_window=hi)


class Window:
    """Slow start, additive increase, multiplicative decrease; then, where the profile
    says so, a paced rate once throttles have shown the limit.

    Every send takes a ticket (a rising number). Answers are reported with the
    ticket of the call they answer, which is how a throttle can tell whether
    its call left before or after the last decrease.
    """

    def __init__(self, profile: WindowProfile, *, headroom: float = 0.0) -> None:
        if not 0.0 <= headroom < 1.0:
            raise ValueError("the headroom must be at least 0 and below 1")
        self.profile = profile
        self.headroom = headroom
        self.cwnd = self._clamp(profile.initial)
        self.ssthresh = self._clamp(profile.ssthresh)
        self._phase: Phase = "slow-start" if self.cwnd < self.ssthresh else "avoidance"
        self.min_latency = math.inf
        self._min_latency_at = -math.inf
        self.srtt: float | None = None  # smoothed latency (RFC 6298's weight, 1/8)
        self.throttled = False
        self.pace = 0.0
        self._next_send = -math.inf
        self._last_change = -math.inf
        self._sent = 0
        self._recover = 0
        # Rate mode: instances per second allowed, None until the limit is found.
        self.rate: float | None = None
        self.found = 0.0  # the highest rate a throttle has shown got through
        self._step = 0.0
        self._next_probe = math.inf
        self._pace_binds = True
        self._last_size = 1
        self._first_throttle = math.inf
        self._first_throttled_ticket = 0
        self._delivered: deque[tuple[float, int, int]] = deque()

    @property
    def phase(self) -> Phase:
        """slow-start or avoidance (the window's), or paced once rate mode has begun."""
        return "paced" if self.rate is not None else self._phase

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

    def on_send(self, now: float | None = None, size: int = 1) -> int:
        """A call of ``size`` IDs leaves; returns its ticket (``now`` matters only when paced)."""
        self._sent += 1
        self._last_size = size
        if self.rate is not None:
            # The pace held this call back (it left as soon as allowed) or something else did.
            self._pace_binds = now is None or now - self._next_send < max(0.05, self.pace / 2)
            self.pace = size / self.rate
        if self.pace and now is not None:
            self._next_send = now + self.pace
        return self._sent

    def send_at(self) -> float:
        """Earliest time the next call may leave (minus infinity unless pacing)."""
        return self._next_send if self.pace else -math.inf

    def delivery(self, now: float) -> float:
        """IDs answered with success per second over the last DELIVERY_SPAN (and since the
        first throttle, whose burst has nothing to say of the refill)."""
        self._forget(now)
        start = now - DELIVERY_SPAN
        if len(self._delivered) > DELIVERY_CALLS:
            start = min(start, self._delivered[-DELIVERY_CALLS][0])
        since = max(start, self._first_throttle if self.throttled else -math.inf)
        span = now - since if math.isfinite(since) else DELIVERY_SPAN
        if span <= 0:
            return 0.0
        # Calls sent before the first throttle's went out while the burst lasted.
        after = self._first_throttled_ticket
        return sum(n for t, n, ticket in self._delivered if t > since and ticket > after) / span

    def _forget(self, now: float) -> None:
        while self._delivered and self._delivered[0][0] <= now - DELIVERY_KEEP:
            self._delivered.popleft()

    def _round_trip(self) -> float:
        return 0.05 if math.isinf(self.min_latency) else max(self.min_latency, 0.001)

    def on_success(
        self, ticket: int, latency: float, now: float, in_flight: int, size: int = 1
    ) -> bool:
        """A call answered without a throttle or server error. Returns True if cwnd changed.

        ``in_flight`` counts the calls outstanding when the answer came, this one included;
        ``size`` is how many IDs the call carried.
        """
        p = self.profile
        self._see_latency(latency, now)
        self._delivered.append((now, size, ticket))
        self._forget(now)
        if self.rate is not None:
            return self._paced_success(now, in_flight)
        if self.pace:
            self.pace *= p.pace_relief
            if self.pace < self._round_trip() / 2:
                self.pace = 0.0
            return False
        if p.require_use and in_flight < self.cwnd / 2:
            return False
        if self._phase == "slow-start":
            # One more per answer doubles the window per round trip.
            grown = min(self.cwnd + self._start_step(), self.ssthresh, float(p.max_window))
            if grown >= self.ssthresh:
                self._phase = "avoidance"
            return self._set(grown, now)
        seen = latency if not p.smoothed_gate or self.srtt is None else self.srtt
        if seen >= self.gate() or self._dampened(now):
            return False
        step = p.increase
        if self.throttled and p.increase_after_throttle is not None:
            step = p.increase_after_throttle
        return self._set(self.cwnd + step, now)

    def _start_step(self) -> float:
        span = self.profile.scaled_start
        if span is None or math.isinf(self.min_latency):
            return 1.0
        return float(min(4, max(1, int(self.min_latency / span + 1e-9))))

    def _paced_success(self, now: float, in_flight: int) -> bool:
        assert self.rate is not None
        p = self.profile
        if now >= self._next_probe:
            # Probe only while the pace is what holds calls back: a rate nothing uses (the
            # queue ran dry, the window is full) says nothing about the limit.
            ceiling = (1.0 - self.headroom) * self.found if self.headroom else math.inf
            if self._pace_binds:
                self.rate = min(self.rate + self._step, ceiling)
            # On a clock: the next probe is due an interval after this one was.
            interval = max(p.probe_interval, 2 * self._round_trip())
            self._next_probe = max(self._next_probe + interval, now + interval / 2)
            self.pace = self._last_size / self.rate
        # The window only keeps a hung endpoint from collecting calls: it must never be
        # what holds the pace back.
        if in_flight >= self.cwnd - 1:
            return self._set(self.cwnd + 1, now)
        return False

    def _see_latency(self, latency: float, now: float) -> None:
        # The lowest latency of the last MIN_LATENCY_WINDOW seconds, as BBR keeps its min
        # RTT: a lowest-ever value would hold the gate shut for good once the API slows down.
        if latency <= self.min_latency or now - self._min_latency_at > MIN_LATENCY_WINDOW:
            self.min_latency, self._min_latency_at = latency, now
        self.srtt = latency if self.srtt is None else self.srtt + (latency - self.srtt) / 8

    def on_throttle(self, ticket: int, now: float) -> bool:
        """The API said slow down. Returns True if cwnd changed."""
        p = self.profile
        if not self.throttled:
            self._first_throttle, self._first_throttled_ticket = now, ticket
        self.throttled = True
        if p.once_per_round_trip:
            if ticket <= self._recover:
                return False
        elif self._phase == "avoidance" and self._dampened(now):
            return False
        if p.rate_mode and self._measured(now):
            return self._slow_to_delivery(now)
        if p.pacing and self.cwnd <= p.min_window:
            # Even one call at a time is too many: a window below one is a gap between sends.
            self.pace = min(p.max_pace, max(self.pace * 2, self._round_trip()))
            self._next_send = max(self._next_send, now + self.pace)
            self._recover = self._sent
            return False
        if self._phase == "slow-start":
            return self._collapse(now)
        if p.reno_ssthresh:
            self.ssthresh = self._clamp(self.cwnd * p.decrease)
        return self._decrease(self.cwnd * p.decrease, now)

    def _measured(self, now: float) -> bool:
        """Whether what got through since the first throttle says what the limit is."""
        since = now - self._first_throttle
        after = self._first_throttled_ticket
        enough = max(MIN_MEASURE, 2 * self._round_trip())
        return since >= enough and any(ticket > after for _, _, ticket in self._delivered)

    def _slow_to_delivery(self, now: float) -> bool:
        """A throttle in rate mode (or the one that starts it): send a little under what
        has been getting through, and probe upward from there on a clock."""
        p = self.profile
        got = self.delivery(now)
        if self.rate is None:
            self._step = max(p.probe_step * got, 0.01)
        self.found = got
        target = p.rate_decrease * got
        if self.rate is not None:
            target = min(target, p.rate_decrease * self.rate)
        self.rate = max(target, 0.01)
        if self.headroom:
            self.rate = min(self.rate, (1.0 - self.headroom) * self.found)
        self.pace = self._last_size / self.rate
        self._next_send = max(self._next_send, now + self.pace)
        self._next_probe = now + max(p.probe_interval, 2 * self._round_trip())
        self._recover = self._sent
        return False

    def on_error(self, ticket: int, now: float) -> bool:
        """A server error or timeout. Collapses the window in slow start; ignored after."""
        if self._phase != "slow-start" or self.rate is not None:
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
        if self.rate is not None:
            # Nothing came back: half the rate, and half the calls that may wait on it.
            self.rate = max(self.rate / 2, 0.01)
            self.pace = self._last_size / self.rate
            self._next_probe = now + max(self.profile.probe_interval, 2 * self._round_trip())
            return self._decrease(self.cwnd * self.profile.decrease, now)
        if self._phase == "slow-start":
            return self._collapse(now)
        return self._decrease(self.cwnd * self.profile.decrease, now)

    def restart(self, now: float) -> None:
        """After an outage: slow start again from the initial window, pacing dropped."""
        self.pace = 0.0
        self.rate = None
        self.throttled = False
        self._first_throttle, self._first_throttled_ticket = math.inf, 0
        self._delivered.clear()
        self._next_probe = math.inf
        self.min_latency, self._min_latency_at = math.inf, -math.inf  # it may answer slower now
        self.srtt = None
        self._recover = self._sent
        self._set(self.profile.initial, now)
        self._phase = "slow-start" if self.cwnd < self.ssthresh else "avoidance"

    def _dampened(self, now: float) -> bool:
        # A nanosecond of slack keeps sums of float steps from reading 0.1 s as 0.0999…
        return now - self._last_change < self.profile.dampening - 1e-9

    def _collapse(self, now: float) -> bool:
        if self.profile.reno_ssthresh:
            self.ssthresh = self._clamp(self.cwnd * self.profile.decrease)
        changed = self._decrease(1.0, now)
        self._phase = "slow-start" if self.cwnd < self.ssthresh else "avoidance"
        return changed

    def _decrease(self, value: float, now: float) -> bool:
        self._recover = self._sent
        return self._set(value, now)

    def _set(self, value: float, now: float) -> bool:
        value = self._clamp(value)
        if value == self.cwnd:
            # Nothing changed, so nothing starts the dampening interval over: a throttle
            # at the floor must not silence the next one.
            return False
        # Every change, up or down, restarts the dampening interval.
        self._last_change = now
        self.cwnd = value
        return True

    def _clamp(self, value: float) -> float:
        return float(min(max(value, self.profile.min_window), self.profile.max_window))


SEED = WindowProfile(name="seed")
# The window alone, as TCP Reno with the seed's constants.
RENO = WindowProfile(
    name="reno",
    relative_gate=2.0,
    once_per_round_trip=True,
    require_use=True,
    reno_ssthresh=True,
    increase_after_throttle=1.0,
    pacing=True,
    timeout_is_congestion=True,
)
# Reno until throttles have shown the limit, then the measured rate, paced.
RATE = replace(RENO, name="rate", rate_mode=True, smoothed_gate=True, scaled_start=0.1)
ADAPTIVE = ControllerProfile()
Profile = WindowProfile | ControllerProfile
# What the engine drives: the model, or the window of the seed and reno.
Control = Window | Controller
PROFILES: dict[str, Profile] = {p.name: p for p in (ADAPTIVE, SEED, RENO, RATE)}


def new_controller(profile: Profile, headroom: float = 0.0) -> Control:
    """The controller a profile names: the model, or the window of the seed and reno."""
    if isinstance(profile, ControllerProfile):
        return Controller(profile, headroom=headroom)
    return Window(profile, headroom=headroom)
