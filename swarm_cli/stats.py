"""Counters kept from the engine's events: what the display and the summary show."""

from __future__ import annotations

import math
import threading
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from .events import (
    Answered,
    Event,
    OutageBegan,
    Queued,
    Recovered,
    Resolved,
    Retried,
    Sent,
    StoodStill,
    Stopping,
    Subscriber,
    Throttled,
    TimedOut,
    WindowChanged,
)
from .ledger.record import WAS_ALREADY_CODE
from .outage import outage_words, outage_words_of
from .outcome import Kind
from .report import PairReport, Sample, WindowReport

MAX_SAMPLES = 2000  # past this, every other point is dropped and the spacing doubles
BURST_SPANS = 3  # a first throttle within this many spans ends a burst (EC2's: 5-15 s)
RATE_SPAN = 5.0  # seconds of history behind a rate: long enough to smooth a sawtooth
# A rate under this share of the best one reached, for this long, while work for as long
# at the best rate was left, is a fall worth a word: throttles that slowing down does not
# ease (an API refusing a share of calls whatever the pace), not the end of the list.
FALL_SHARE = 0.25
FALL_LASTING = 5.0
# Every answer a throttle for this long is worth a word: the limit is taken by others, or
# the API refuses this caller for now. Nothing is lost; the run goes on probing.
STORM_LASTING = 30.0


@dataclass(frozen=True)
class Snapshot:
    """The counters at one moment, copied under the lock: what a view may read at leisure."""

    total: int
    calls: int
    throttled_calls: int
    retries: int
    timeouts: int
    outages: int
    stood_still: float
    outage_since: float | None
    outage: str  # what the endpoint does while down: "no answer from the endpoint"
    stopping: str | None
    throttled_since: float | None
    succeeded: int
    failed: int
    missing: int
    pending: int
    cwnd: float
    ssthresh: float
    peak_cwnd: float
    pace: float
    in_flight: int
    peak_in_flight: int
    window_decreases: int
    started: float | None
    last: float
    phase: str
    errors: Mapping[str, int]
    codes: Mapping[str, int]
    series: tuple[Sample, ...]
    batch: int = 0  # IDs the last call could carry
    waiting_since: float | None = None  # when the oldest call still unanswered left

    @property
    def done(self) -> int:
        """Intents with a known outcome (pending ones are not: nobody knows)."""
        return self.succeeded + self.failed + self.missing

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.last - self.started


@dataclass
class Stats(Subscriber):
    total: int = 0
    calls: int = 0
    throttled_calls: int = 0
    retries: int = 0
    timeouts: int = 0  # calls that timed out with no answer (their IDs tried again)
    unchanged: int = 0  # succeeded, but EC2 said each was there already (WasAlready)
    outages: int = 0
    stood_still: float = 0.0  # seconds the process itself stood still, in all
    outage_since: float | None = None  # set while the endpoint is unreachable
    outage: str = outage_words(None)
    stopping: str | None = None  # why the run is winding down early
    # When the answers turned all throttles (none let through since): None while not.
    throttled_since: float | None = None
    succeeded: int = 0
    failed: int = 0
    missing: int = 0
    pending: int = 0
    cwnd: float = 0.0
    ssthresh: float = 0.0
    peak_cwnd: float = 0.0
    pace: float = 0.0
    in_flight: int = 0
    peak_in_flight: int = 0
    window_decreases: int = 0
    started: float | None = None
    last: float = 0.0
    # (seconds since start, cwnd) at each change: enough to draw the window.
    trajectory: list[tuple[float, float]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    # Every error code seen, throttles, retries and time-outs included: what the view ranks.
    codes: dict[str, int] = field(default_factory=dict)
    phase: str = ""
    series: list[Sample] = field(default_factory=list)
    spacing: float = 0.05  # least seconds between two samples of answers
    # The most calls in flight since the last sample: what a sample's in_flight holds, so
    # that the chart's peak is the run's (a sample at an answer sees one call fewer).
    flight_peak: int = 0
    batch: int = 0
    # Calls on their way, by their first ID: when each left, oldest first.
    flying: dict[str, float] = field(default_factory=dict, repr=False)
    # When the first of the calls given up on with no answer since the last answer left.
    silent_since: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def done(self) -> int:
        """Intents with a known outcome (pending ones are not: nobody knows)."""
        return self.succeeded + self.failed + self.missing

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.last - self.started

    def snapshot(self) -> Snapshot:
        """A frozen copy, so a view never reads a field while a worker changes it."""
        with self.lock:
            return Snapshot(
                total=self.total,
                calls=self.calls,
                throttled_calls=self.throttled_calls,
                retries=self.retries,
                timeouts=self.timeouts,
                outages=self.outages,
                stood_still=self.stood_still,
                outage_since=self.outage_since,
                outage=self.outage,
                stopping=self.stopping,
                throttled_since=self.throttled_since,
                succeeded=self.succeeded,
                failed=self.failed,
                missing=self.missing,
                pending=self.pending,
                cwnd=self.cwnd,
                ssthresh=self.ssthresh,
                peak_cwnd=self.peak_cwnd,
                pace=self.pace,
                in_flight=self.in_flight,
                peak_in_flight=self.peak_in_flight,
                window_decreases=self.window_decreases,
                started=self.started,
                last=self.last,
                phase=self.phase,
                errors=dict(self.errors),
                codes=dict(self.codes),
                series=tuple(self.series),  # bounded at MAX_SAMPLES: a cheap copy
                batch=self.batch,
                waiting_since=self._waiting_since(),
            )

    def __call__(self, event: Event) -> None:
        with self.lock:
            if self.started is None:
                self.started = event.at
                self.trajectory.append((0.0, event.cwnd))
                self.peak_cwnd = event.cwnd
            self.last = event.at
            self.in_flight = event.in_flight
            if event.in_flight > self.flight_peak:
                self.flight_peak = event.in_flight
                self.peak_in_flight = max(self.peak_in_flight, event.in_flight)
            event.deliver(self)
            self.cwnd = event.cwnd
            self.ssthresh = event.ssthresh
            self.pace = event.pace
            self.phase = event.phase
            self.peak_cwnd = max(self.peak_cwnd, event.cwnd)

    # Each method below runs under the lock, from __call__.

    def on_queued(self, event: Queued) -> None:
        self.total += len(event.ids)

    def on_sent(self, event: Sent) -> None:
        self.calls += 1
        self.batch = event.batch
        if event.ids:
            self.flying[event.ids[0]] = event.at

    def on_answered(self, event: Answered) -> None:
        left = self.flying.pop(event.ids[0], None) if event.ids else None
        if event.outcome is not None and event.outcome.kind is Kind.UNREACHABLE:
            # No answer at all: the silence goes on from when this call left.
            if left is not None and (self.silent_since is None or left < self.silent_since):
                self.silent_since = left
        else:
            self.silent_since = None
        if event.outcome is None or event.outcome.kind is not Kind.THROTTLED:
            # The API let this call through, or the call met no API at all (refused,
            # reset): either way not every call is throttled.
            self.throttled_since = None
        self._sample(event, keep=False)

    def on_throttled(self, event: Throttled) -> None:
        if self.throttled_since is None:
            self.throttled_since = event.at
        self.throttled_calls += 1
        self._count_code(event)
        self._sample(event, keep=True)

    def on_retried(self, event: Retried) -> None:
        self.retries += 1
        self._count_code(event)

    def on_timed_out(self, event: TimedOut) -> None:
        # No answer at all: an endpoint (or a credential refresh) that hangs, not a throttle.
        self.throttled_since = None
        self.timeouts += 1
        self._count_code(event)

    def on_outage(self, event: OutageBegan) -> None:
        self.outage = outage_words_of(event.outcome)  # before the time that makes views read it
        self.outages += 1
        self.outage_since = event.at
        self._sample(event, keep=True)

    def on_recovered(self, event: Recovered) -> None:
        self.outage_since = None
        self._sample(event, keep=True)

    def on_stood_still(self, event: StoodStill) -> None:
        self.stood_still += event.latency
        # The engine gives calls in flight the time back: their silence is not the endpoint's.
        self.flying = {i: at + event.latency for i, at in self.flying.items()}
        if self.silent_since is not None:
            self.silent_since += event.latency

    def on_stopping(self, event: Stopping) -> None:
        self.stopping = event.outcome.message if event.outcome else "stopping"

    def on_window(self, event: WindowChanged) -> None:
        assert self.started is not None
        if event.cwnd < self.trajectory[-1][1]:
            self.window_decreases += 1
        self.trajectory.append((round(event.at - self.started, 4), event.cwnd))
        self._sample(event, keep=True)

    def on_resolved(self, event: Resolved) -> None:
        setattr(self, event.status, getattr(self, event.status) + 1)
        for i in event.ids:  # a call a stop left unanswered is no longer awaited
            self.flying.pop(i, None)
        outcome = event.outcome
        if event.status == "succeeded":
            if outcome is not None and outcome.code == WAS_ALREADY_CODE:
                self.unchanged += 1
        elif outcome is not None and outcome.code:
            self.errors[outcome.code] = self.errors.get(outcome.code, 0) + 1
            self._count_code(event)

    def _waiting_since(self) -> float | None:
        """When the endpoint last left a call unanswered and has not answered since: the
        oldest call on its way, or the first given up on with no answer."""
        oldest = next(iter(self.flying.values()), None)
        if oldest is None or self.silent_since is None:
            return oldest  # nothing on its way, or no silence before it
        return min(oldest, self.silent_since)

    def _count_code(self, event: Event) -> None:
        """Every error code seen, throttles, retries and time-outs included."""
        if event.outcome is not None and event.outcome.code:
            code = event.outcome.code
            self.codes[code] = self.codes.get(code, 0) + 1

    def _sample(self, event: Event, *, keep: bool) -> None:
        """A point for the charts: every change of the window, answers at most each ``spacing``."""
        assert self.started is not None
        t = round(event.at - self.started, 4)
        if not keep and self.series and t - self.series[-1].t < self.spacing:
            return
        self.series.append(Sample(t, event.cwnd, self.flight_peak, self.done, self.throttled_calls))
        self.flight_peak = event.in_flight
        if len(self.series) > MAX_SAMPLES:  # bounded history: halve the resolution
            self.series = _halved(self.series)
            self.spacing *= 2

    def _closed(self) -> list[Sample]:
        """The series with a last point at the last event: an answer's sample is taken
        before its IDs resolve, so the last answer's would be left out of the counts."""
        series = list(self.series)
        if self.started is None:
            return series
        t = round(self.last - self.started, 4)
        if series and (series[-1].t, series[-1].done) == (t, self.done):
            return series
        series.append(Sample(t, self.cwnd, self.flight_peak, self.done, self.throttled_calls))
        return series

    def report(self, into: PairReport) -> PairReport:
        """Copy the counters into a pair's report."""
        with self.lock:
            into.calls = self.calls
            into.throttled_calls = self.throttled_calls
            into.retries = self.retries
            into.timeouts = self.timeouts
            into.unchanged = self.unchanged
            into.outages = self.outages
            into.stood_still_seconds = round(self.stood_still, 1)
            into.peak_in_flight = self.peak_in_flight
            into.errors = dict(sorted(self.errors.items()))
            into.elapsed_seconds = round(self.elapsed(), 3)
            into.series = self._closed()
            if self.throttled_since is not None:
                streak = self.last - self.throttled_since
                into.throttled_for = round(streak, 1) if streak >= STORM_LASTING else None
            into.window = WindowReport(
                final=self.cwnd,
                peak=self.peak_cwnd,
                ssthresh=self.ssthresh,
                pace_seconds=round(self.pace, 4),
                decreases=self.window_decreases,
                trajectory=list(self.trajectory),
            )
        return into


def _halved(series: list[Sample]) -> list[Sample]:
    """Every other sample; each kept one also holds the peak in flight of the one dropped
    before it (a sample's peak is that of the time since the sample before)."""
    out = series[::2]
    for k in range(1, len(out)):
        dropped = series[2 * k - 1].in_flight
        if dropped > out[k].in_flight:
            out[k] = replace(out[k], in_flight=dropped)
    return out


@dataclass
class Fall:
    """A stretch where a pair's rate stayed far below the best it had reached."""

    best: float  # intents per second, the best rate over RATE_SPAN before the fall
    low: float  # the lowest rate during it
    since: float  # seconds since the pair started, when the rate went under
    until: float  # the last point still under

    @property
    def lasted(self) -> float:
        return self.until - self.since


class RateWatch:
    """A pair's rate (intents done per second over the last ``span`` seconds) followed
    through its samples, and whether it fell under ``share`` of the best it reached for
    ``lasting`` seconds or more while work for that long at the best rate was left.

    When the first throttle comes early on (a burst spent: ten times the refill at EC2's
    limits), the best is what spans since have reached: a burst's rate is no rate to fall
    from.

    Fed the series as it grows (``update`` reads only the new points), so a view may ask
    at every refresh; a series that was halved is read again from its start.
    """

    def __init__(
        self, span: float = RATE_SPAN, share: float = FALL_SHARE, lasting: float = FALL_LASTING
    ) -> None:
        self.span = span
        self.share = share
        self.lasting = lasting
        self._reset()

    def _reset(self) -> None:
        self._t: list[float] = []
        self._done: list[int] = []
        self._last: Sample | None = None
        self.rate: float | None = None  # at the last point, once a whole span is behind it
        self.best = 0.0
        self.falling: Fall | None = None  # the fall under way, however long so far
        self.longest: Fall | None = None  # the longest fall over, that lasted long enough
        self._dry_at: float | None = None  # the first point with a throttle behind it

    def update(self, series: Sequence[Sample], total: int) -> RateWatch:
        n = len(self._t)
        if n and (len(series) < n or series[n - 1] is not self._last):
            self._reset()
            n = 0
        for point in series[n:]:
            self._add(point, total)
        self._last = series[-1] if series else None
        return self

    def fell(self) -> Fall | None:
        """The longest fall that lasted long enough, the one under way included."""
        falls = [f for f in (self.longest, self.falling) if f and f.lasted >= self.lasting]
        return max(falls, key=lambda f: f.lasted, default=None)

    def _add(self, p: Sample, total: int) -> None:
        self._t.append(p.t)
        self._done.append(p.done)
        if p.throttled and self._dry_at is None:
            self._dry_at = p.t
            if p.t <= BURST_SPANS * self.span:
                # The bucket ran dry early: what its burst let through, however fast, is
                # no rate the refill keeps up (10x it at EC2's limits), and no best to
                # fall from. (Dry later, the rate before it was kept up for a while.)
                self._close()
                self.best = 0.0
            else:
                self._dry_at = -math.inf
        if p.t < self.span:
            return
        # What was done before the span is read at the first point inside it.
        first = bisect_right(self._t, p.t - self.span)
        rate = (p.done - self._done[first]) / self.span
        self.rate = rate
        f = self.falling
        left = total - p.done
        if f is not None:
            if rate >= self.share * f.best or left <= f.best * self.lasting:
                self._close()
            else:
                f.low = min(f.low, rate)
                f.until = p.t
                return
        if self._dry_at is None or p.t - self.span >= self._dry_at:
            self.best = max(self.best, rate)  # over a span wholly before or after it
        if rate < self.share * self.best and left > self.best * self.lasting:
            self.falling = Fall(self.best, rate, p.t, p.t)

    def _close(self) -> None:
        f, self.falling = self.falling, None
        if f is None or f.lasted < self.lasting:
            return
        if self.longest is None or f.lasted > self.longest.lasted:
            self.longest = f
