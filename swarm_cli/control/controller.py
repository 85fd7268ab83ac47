"""The controller: a canary call, a paced startup, then calls paced at what gets through.

Composed of the estimator (what the refill pays for), the prober (ask for more on a
clock while nothing pushes back), the noise floor (throttles that do not answer to the
pace) and the pacer with its cap on calls in flight. Time comes in as arguments; nothing
here sleeps, locks or reads a clock.

- canary: the first call goes alone, so a wrong credential or a refused instance shows
  on one call.
- startup: the window opens to ``initial`` calls and grows by ``growth`` per success,
  sends paced across the round trip (never back to back, which would drain a small
  burst in an instant and say nothing of the refill), until the first throttle, or
  (when one proved random: the calls around it kept going through, also at half the
  pace) until a share of throttles well over the random one.
- paced: calls leave at the upper estimate of what the refill pays for; every probe
  interval without throttles (beyond the noise) the rate grows by ``probe_gain``; at a
  slow refill the call after a throttle goes ``retry_share`` of a gap later.
- shut out: when every call throttles whatever the pace (others hold the whole bucket
  for a while), the first calm answers after it start the startup again from its first
  window, as the run's first success does after a canary that throttled.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Literal

from .estimator import DeliveryEstimator
from .noise import NoiseFloor
from .pacing import Pacer, cap_for, window_bounds
from .rounds import DeliveryRounds

Phase = Literal["canary", "startup", "paced"]
MIN_RTT_SPAN = 10.0  # seconds a lowest latency stays the reference
CALM_SHARE = 0.05
PROBE_ANSWERS = 4
CLEAN_ANSWERS = 2  # ... or this many with no throttle among them (beyond the noise)
MAX_BACKOFF = 4  # probe intervals grow to at most 2**this times the shortest
KEEP_UP = 0.8  # answers under this share of the pace, with few throttles: the endpoint is behind
QUEUED = 3.0  # answers this many times slower than the fastest: a queue at the endpoint
CHECK_FEWEST = 4  # answers that judge whether a throttle in startup was the bucket's
HELD = 0.5  # ... and the share of them a slower pace keeps when they are random
RANDOM = 0.15  # ... and the least share of throttles that says they are
SLOW_GAP = 4.0  # gaps this many round trips long are a slow refill's
READY_ROUNDS = 3.0  # round trips since the bucket ran dry that cover one whatever the span
STALE_BACKOFF = 0.5  # under this share of the rate a probe last found the limit at, probe often
SLOWED = 2.0  # answers this many times slower than the fastest: the endpoint may be behind
# The longest gap between calls: while every call throttles (others hold the bucket), the
# pace sinks with the time since the last success; a stretch of minutes must not leave
# the first call after it minutes late. A throttled call takes no token.
MOST_GAP = 20.0
# A running share of throttles at most this: the pace sits just over the refill, and a
# decrease goes to what got through, not to one call more (which throttles one in a few
# dozen for good).
CLOSE = 0.1


@dataclass
class Overshoot:
    """The calls on their way when the startup's first throttle came, sent at ``arrival``
    IDs per second: a bucket run dry lets through the share of them its refill pays for,
    so each answer to one of them says more of the refill than a halving per round trip
    would (a burst of 20 spent at a thousand calls a second, refilled at 5, threw some
    thirty more calls at the empty bucket while the rate halved its way down)."""

    arrival: float
    last: int  # the last ticket among them
    answers: int = 1  # the first throttle
    ok: int = 0

    def count(self, ticket: int, ok: bool) -> bool:
        """Counts an answer; returns whether it was to one of those calls."""
        if ticket > self.last:
            return False
        self.answers += 1
        self.ok += ok
        return True

    def rate(self) -> float:
        """What the refill lets through, with one success more than seen."""
        return (self.ok + 1) / (self.answers + 1) * self.arrival


@dataclass(frozen=True)
class ControllerProfile:
    name: str = "adaptive"
    initial: float = 10.0  # calls in flight after the canary (TCP's IW10)
    growth: float = 1.0  # added per success in startup: 1 doubles the window per round trip
    startup_gain: float = 2.0  # startup paces at this many windows per round trip
    probe_gain: float = 1.1  # a first probe asks for this much more ...
    probe_growth: float = 2.0  # ... and each probe in a row that found room this much more again
    most_probe: float = 2.0  # no probe asks for more than this many times the rate
    probe_rounds: float = 2.0  # a probe interval is at least this many round trips
    probe_interval: float = 0.25  # ... and at least this long
    most_decrease: float = 0.7  # a throttle lowers the rate to no less than this share
    # A throttle ends the startup, unless it proves random: of the calls on their way when
    # it came (sent at the startup's pace), no more than a share ``check_share`` of
    # ``check_answers`` throttled (a bucket met faster than it refills throttles most of
    # them), and the calls sent after it at half that pace still throttled now and then
    # (a bucket would have answered to the slower pace). The startup then goes on from
    # the window it had, and ends only when, of its last ``noisy_answers`` answers, a
    # share ``noisy_margin`` over that random share throttled. 0 answers: the first
    # throttle ends it for good.
    check_answers: float = 16
    check_share: float = 1 / 3
    noisy_answers: float = 16
    noisy_margin: float = 0.25
    # Where calls leave many round trips apart, the call after a throttle goes this share
    # of a gap later (0: a whole gap).
    retry_share: float = 1 / 3
    cap_gain: float = 2.0
    cap_slack: int = 4
    min_window: int = 1
    max_window: int = 500

    def bounded(
        self, min_window: int | None = None, max_window: int | None = None
    ) -> ControllerProfile:
        lo, hi = window_bounds(self.min_window, self.max_window, min_window, max_window)
        return replace(self, min_window=lo, max_window=hi)


class Controller:
    """Decides when the next call may leave and how many may be in flight."""

    def __init__(self, profile: ControllerProfile, *, headroom: float = 0.0) -> None:
        if not 0.0 <= headroom < 1.0:
            raise ValueError("the headroom must be at least 0 and below 1")
        self.profile = profile
        self.headroom = headroom
        self.estimator = DeliveryEstimator()
        self.noise = NoiseFloor()
        self.pacer = Pacer()
        self.stage: Phase = "canary"
        self.cwnd = float(self._clamp(1))
        self.rate: float | None = None  # IDs per second, once paced
        self.found = 0.0  # what the refill paid for at the last throttle
        self.min_latency = math.inf
        self._min_latency_at = -math.inf
        self.srtt: float | None = None
        self._sent = 0
        self._recover = 0
        self._in_flight: dict[int, tuple[float, int]] = {}
        self._size = 1
        self._next_probe = math.inf
        self._throttles_since_probe = 0
        self._answers_since_probe = 0
        self._delivered_since_probe = 0  # IDs that succeeded since the last probe
        self._filled_since_probe = False  # the calls in flight reached the cap since then
        self._probe_from: float | None = None  # when that count started
        self._limit_at = 0.0  # the rate at which a probe last found the limit
        self._succeeded = False  # any call has succeeded
        self._until_ready = False  # paced at a guess until the estimate covers a round trip
        self._dry_at = 0.0  # ... from when the bucket ran dry
        self._probed = False  # the rate was raised by a probe since the last decrease
        self._backoff = 0  # probes found the limit this many times more than they found room
        self._step = 1.0  # what the last probe multiplied the rate by
        self._streak = 0  # probes in a row that found room
        self.rounds = DeliveryRounds()
        self._held: float | None = None  # startup's window while a throttle is judged
        # Since the startup ended: answers and throttles to calls sent before (up to
        # ticket ``_check_until``, of which ``_check_left`` are still to come), then after.
        self._check = [0, 0, 0, 0]
        self._check_until = 0
        self._check_left = 0
        self._check_after = 0.0
        self._random = 0.0  # the share of throttles that proved random in startup
        self._noisy = False  # a throttle in startup proved random: a share ends it
        self._recent: deque[bool] = deque()  # startup's last answers, True if throttled
        self._overshoot: Overshoot | None = None

    # What the engine and the views read.

    @property
    def phase(self) -> str:
        return self.stage

    @property
    def throttled(self) -> bool:
        return self.estimator.started

    @property
    def ssthresh(self) -> float:
        return self.found

    @property
    def pace(self) -> float:
        return self.pacer.gap

    @property
    def recover_point(self) -> int:
        return self._recover

    @property
    def limit(self) -> int:
        return self._clamp(int(self.cwnd))

    def send_at(self) -> float:
        return self.pacer.next_at()

    def delivery(self, now: float) -> float:
        return self.estimator.rate(now, self._srtt())

    # Events.

    def on_send(self, now: float | None = None, size: int = 1) -> int:
        self._sent += 1
        self._size = size
        at = 0.0 if now is None else now
        self._in_flight[self._sent] = (at, size)
        if len(self._in_flight) >= self.limit:
            self._filled_since_probe = True
        if self.rate is not None:
            self.pacer.on_send(at, size, self.rate)
        elif self.stage == "startup":
            self.pacer.on_send(at, 1, self.profile.startup_gain * self.cwnd / self._rtt())
        return self._sent

    def on_success(
        self, ticket: int, latency: float, now: float, in_flight: int, size: int = 1
    ) -> bool:
        sent_at, size = self._in_flight.pop(ticket, (now - latency, size))
        self._see_latency(latency, now)
        self.estimator.on_answer(sent_at, size, True, latency)
        back = self.noise.on_answer(ticket, throttled=False)
        before = self.cwnd
        if self._judge(ticket, sent_at, throttled=False):
            return True
        if self.stage == "startup" and self._noisy:
            self._remember(False)
        if self._overshoot is not None:
            self._overshoot.count(ticket, ok=True)
        first, self._succeeded = not self._succeeded, True
        if first and self.stage == "paced":
            # The run's first success, after nothing but throttles (a storm, or others
            # holding the bucket since before it began): the canary's success, late. What
            # the throttles taught says nothing of what gets by now: the startup, from
            # its first window.
            self._start_over()
            self._after_shut_out()
            return True
        if self.stage == "canary":
            self.stage = "startup"
            self.cwnd = float(self._clamp(self.profile.initial))
        elif self.stage == "startup":
            self.rounds.on_success(now, size, self._srtt())
            if self.cwnd >= 2 * self.profile.initial and (self.rounds.flat() or self._queued()):
                # What gets answered has stopped growing with the window, or answers have
                # slowed to several times the fastest: the endpoint serves no more, and
                # more calls in flight would only wait in its queue (and time out). Paced
                # at the most it delivered (BBR's full pipe), or at what is in flight now.
                self.stage = "paced"
                self._next_probe = now + self._probe_interval()
                # Answers to calls sent at the startup's pace say nothing of this one, and
                # nothing has measured the refill: a throttle to come halves the rate per
                # round until answers cover a round trip, as after a first throttle.
                self._recover = self._sent
                self._until_ready, self._dry_at = True, math.inf  # not dry yet
                carried = max(in_flight, 1) * size / self._srtt()
                self._set_rate(max(self.rounds.best, carried) if self.rounds.best else carried)
            else:
                self.cwnd = float(self._clamp(self.cwnd + self.profile.growth))
        else:
            if back is not None:
                self._set_rate(back)
            elif self._until_ready and self._ready(now, self._srtt()):
                self._until_ready = False
                rtt = self._srtt()
                self._set_rate(self.noise.correct(self.estimator.upper(now, rtt, size)))
            self._answers_since_probe += 1
            self._delivered_since_probe += size
            self._probe(now)
        return self.cwnd != before

    def on_throttle(self, ticket: int, now: float) -> bool:
        sent_at, size = self._in_flight.pop(ticket, (now, self._size))
        if self._judge(ticket, sent_at, throttled=True):
            self.noise.on_answer(ticket, throttled=True)
            return True
        if self.stage == "startup" and self._noisy:
            self._remember(True)
            p = self.profile
            if sum(self._recent) < (self._random + p.noisy_margin) * p.noisy_answers:
                # Within what the endpoint throttles at random: nothing of the bucket.
                self.noise.on_answer(ticket, throttled=True)
                return False
        self.estimator.on_answer(sent_at, size, False, now - sent_at)
        back = self.noise.on_answer(ticket, throttled=True)
        before = self.cwnd
        rtt = self._srtt()
        upper = self.noise.correct(self.estimator.upper(now, rtt, size))
        measured = self.estimator.rate(now, rtt)
        # Until many successes lie between two throttles, a measure is rough: the first
        # one stands in, then only solid ones replace it.
        if measured > 0 and (not self.found or self.estimator.solid(now)):
            self.found = self.noise.correct(measured)
        if self.rate is None:
            # The first throttle: the burst is spent. From here on, what the refill pays.
            sending = (
                self.profile.startup_gain * self.cwnd / rtt if self.stage == "startup" else 1 / rtt
            )
            if (
                self.stage == "startup"
                and self.profile.check_answers > 0
                and self.cwnd < self.profile.max_window  # else it has nowhere to go
            ):
                # Judged by the calls already on their way, sent at the startup's pace.
                self._held, self._check = self.cwnd, [0, 0, 0, 0]
                self._check_until, self._check_after = self._sent, now + self._srtt()
                self._check_left = min(len(self._in_flight), int(self.profile.check_answers))
            self.stage = "paced"
            # Nothing sent since has been answered yet: half what was sending, until it is.
            # The calls sent over the fastest round trip before now are all on their way.
            fast = self._rtt()
            recent = sum(1 for at, _ in self._in_flight.values() if at >= now - fast)
            self._overshoot = Overshoot(max(recent, 1) * size / fast, self._sent)
            self._set_rate(sending * size / 2)
            self._recover = self._sent
            self._until_ready, self._dry_at = True, now
            self._next_probe = now + self._probe_interval()
        elif back is not None:
            self._set_rate(back)
        else:
            self._answers_since_probe += 1
            if not self.noise.quiet():
                self._throttles_since_probe += 1
            if self._until_ready and self._ready(now, rtt):
                self._until_ready = False
                self._set_rate(upper)
            elif self._until_ready:
                self._dry_at = min(self._dry_at, now)
                over = self._overshoot
                if over is not None and over.count(ticket, ok=False):
                    # While a throttle in startup is judged (it may be random), or after
                    # one proved so, the share says nothing of the refill.
                    at = max(self.noise.correct(over.rate()), size / self._rtt())
                    if self._held is None and not self._noisy and at < self.rate:
                        self._set_rate(at)
                # No answer yet covers a round trip of calls sent since the bucket ran dry:
                # half what may leave, once per round of calls sent since the last halving
                # (a startup that overshot has a window's worth of throttles on the way, and
                # they all say the same thing).
                if ticket > self._recover:
                    self._recover = self._sent
                    if self.estimator.solid(now):
                        # A short span between throttles with many successes in it: a
                        # bucket kept empty, so what got through is the refill.
                        self._set_rate(min(self.rate, upper))
                    else:
                        self._set_rate(max(self.rate / 2, size / rtt))
            elif ticket <= self._recover:
                pass  # it left before the last decrease: nothing new about the limit
            elif self._probed and not self.noise.quiet():
                # The last probe found the limit: back one step, and probe less often. (The
                # span's estimate may hold a stretch when the bucket sat full, and read low.)
                self._probed = False
                self._backoff = min(self._backoff + 1, MAX_BACKOFF)
                self._limit_at = self.rate
                self._streak = 0
                self._recover = self._sent
                self._set_rate(self.rate / self._step)
            elif self.estimator.solid(now) and upper > self.rate:
                # A later span shows more getting through than the pace allows (an earlier
                # one counted a stretch when the bucket sat full): follow it up.
                self._set_rate(upper)
            elif upper < self.rate and not self.noise.quiet():
                solid = self.estimator.solid(now)
                if solid and upper >= self.rate * self.profile.most_decrease:
                    # Only a decrease to a measured rate says anything of the noise.
                    self.noise.decreased(self.rate, self._sent)
                self._recover = self._sent
                # A span of many successes that held a stretch with the bucket full reads
                # low: from one, at most this much lower per round trip (the next throttle
                # comes soon enough at such rates). With few, the estimate is the bound.
                if solid:
                    if self.noise.share <= CLOSE:
                        upper = self.noise.correct(measured)
                    upper = max(upper, self.rate * self.profile.most_decrease)
                self._set_rate(upper)
        if self.stage == "paced" and self.profile.retry_share > 0 and not self._in_flight:
            # A slow refill, nothing else on its way: the token this call missed comes
            # within a gap, and the call that finds it last is what the run waits for.
            gap, rtt = self.pacer.gap, self._srtt()
            if gap > SLOW_GAP * rtt:
                self.pacer.sooner(now + max(gap * self.profile.retry_share, rtt))
        return self.cwnd != before

    def on_error(self, ticket: int, now: float) -> bool:
        """A server error: says nothing of the limit."""
        self._in_flight.pop(ticket, None)
        return False

    def on_timeout(self, ticket: int, now: float) -> bool:
        """No answer at all: half the rate, and half the calls that may wait on it."""
        self._in_flight.pop(ticket, None)
        if ticket <= self._recover:
            return False
        self._recover = self._sent
        before = self.cwnd
        if self.rate is not None:
            self._set_rate(self.rate / 2)
        else:
            self.cwnd = float(self._clamp(self.cwnd / 2))
        return self.cwnd != before

    def restart(self, now: float) -> None:
        """After an outage: a canary again, everything measured forgotten."""
        self.stage = "canary"
        self.rate = None
        self.cwnd = float(self._clamp(1))
        self.estimator.reset()
        self.noise = NoiseFloor()
        self.pacer.reset()
        self.min_latency, self._min_latency_at, self.srtt = math.inf, -math.inf, None
        self._in_flight.clear()
        self._recover = self._sent
        self._next_probe = math.inf
        self._until_ready = self._probed = self._succeeded = False
        self._backoff = self._streak = 0
        self._limit_at = 0.0
        self.rounds = DeliveryRounds()
        self._probe_from = None
        self._held, self._noisy, self._random = None, False, 0.0
        self._overshoot = None
        self._filled_since_probe = False
        self._recent.clear()

    # Parts.

    def _remember(self, throttled: bool) -> None:
        self._recent.append(throttled)
        while len(self._recent) > self.profile.noisy_answers:
            self._recent.popleft()

    def _judge(self, ticket: int, sent_at: float, throttled: bool) -> bool:
        """Counts an answer after a throttle ended the startup: first to the calls sent at
        the startup's pace, then to those sent after at half of it. When the first went
        mostly through and the second throttled about as often (slowing down did not
        help: the throttle was not the bucket's), the startup goes on. Returns whether it
        did."""
        if self._held is None or self.stage != "paced":
            return False
        p = self.profile
        c = self._check
        if ticket <= self._check_until:
            if self._check_left > 0:
                c[0] += 1
                c[1] += throttled
                self._check_left -= 1
                whole = c[0] + self._check_left
                if whole >= CHECK_FEWEST and c[1] > p.check_share * whole:
                    self._held = None  # the bucket, whatever the rest say
                    return False
        elif sent_at >= self._check_after and c[2] < 2 * p.check_answers:
            # Sent a round trip after the startup ended: it met the bucket after the
            # calls sent before, and says what the slower pace alone found there.
            c[2] += 1
            c[3] += throttled
        if self._check_left > 0:
            return False
        before = c[1] / max(c[0], 1)
        if c[0] < CHECK_FEWEST or before > p.check_share:
            self._held = None  # the bucket: the startup is over
            return False
        after, share = c[3] / max(c[2], 1), (c[1] + c[3]) / (c[0] + c[2])
        doubt = after < HELD * before or share < RANDOM
        if c[2] < p.check_answers or (doubt and c[2] < 2 * p.check_answers):
            return False  # too few yet, or as many again before they say the bucket
        held, self._held = self._held, None
        if after < HELD * before or after > p.check_share or share < RANDOM:
            # The slower pace throttled far less (the bucket answered to it), or more (it
            # ran dry), or under one in seven throttled in all: what calls of uneven
            # latency meeting a small bucket cost anyway.
            return False
        # That throttle was not the bucket's: what it taught is forgotten, and from now on
        # only a share of throttles ends the startup.
        self._start_over(held)
        self._noisy = True
        self._random = share
        # A decrease that did not reduce the throttles: the noise floor's own evidence.
        self.noise.learn(min(before, after))
        return True

    def _start_over(self, window: float | None = None) -> None:
        """Back to the startup, from ``window`` (its first one by default), with what was
        measured of the bucket forgotten."""
        self.stage = "startup"
        self.rate = None
        self.found = 0.0
        self.cwnd = float(self._clamp(self.profile.initial if window is None else window))
        self.estimator.reset()
        self._recent.clear()
        self._until_ready = self._probed = False
        self._backoff = self._streak = 0
        self._next_probe = math.inf
        self.pacer.retime(self.profile.startup_gain * self.cwnd / self._rtt())

    def _after_shut_out(self) -> None:
        """What a startup after a stretch that shut every call out starts from: nothing
        of the rounds or probes before it, and no answer to a call sent before it."""
        self.noise.shut_out = False
        self.rounds = DeliveryRounds()
        self._recover = self._sent
        self._throttles_since_probe = self._answers_since_probe = 0
        self._delivered_since_probe, self._probe_from = 0, None

    def _probe(self, now: float) -> None:
        assert self.rate is not None
        if now < self._next_probe:
            return
        interval = self._probe_interval()
        # Calm: throttles in this interval no more than the noise makes, and a few in a
        # hundred (a small bucket behind calls of uneven latency throttles some anyway).
        allowed = (self.noise.floor + CALM_SHARE) * self._answers_since_probe
        answers = self._answers_since_probe
        if answers < PROBE_ANSWERS and (self._throttles_since_probe or answers < CLEAN_ANSWERS):
            # The interval goes on until enough answers say how calm it was. Where calls
            # have become rare (what others leave of a bucket, then they stop), a few with
            # no throttle at all will do: the probes keep to a clock, not to the answers.
            return
        calm = self._throttles_since_probe <= allowed
        # What the endpoint answered over the interval, counting the noise's throttles
        # as answered: far under the pace, with few throttles, it serves no more (a queue
        # builds where it answers slower, and probing would only lengthen it).
        # Only where the cap held calls back: with room to spare, few answers are what
        # was sent (a client starved of CPU stalls its sends and reads answers late).
        slowed = self.srtt is not None and self.srtt > SLOWED * self._rtt()
        slowed = slowed and self._filled_since_probe
        behind = False
        if slowed and self._probe_from is not None:  # the first interval has no start
            seconds = max(now - self._probe_from, 1e-3)
            delivered = self.noise.correct(self._delivered_since_probe / seconds)
            behind = delivered < KEEP_UP * self.rate
        if calm and behind:
            # A rate the endpoint's answers set, not a probe's: a throttle at it is met
            # by a decrease, not by a step back from it, and probes start small again.
            self._probed, self._streak = False, 0
            self._set_rate(min(self.rate, delivered * self.profile.probe_gain))
        elif calm and self.noise.shut_out:
            # Calls get by again after a stretch that shut them out: what was measured
            # before says nothing of what gets by now. The startup again, from its first
            # window, finds it in a few round trips (probes from the rate the stretch
            # left would take minutes).
            self._start_over()
            self._after_shut_out()
            return
        elif calm and self.pacer.binds and not self._queued():
            if self._probed:
                self._backoff = max(0, self._backoff - 1)  # the last probe found room
                self._streak += 1
            self._probed = True
            # Far below the limit, probes grow (CUBIC's convex side): a low estimate is left
            # in a few round trips, and near the limit a probe overshoots by little.
            p = self.profile
            self._step = min(p.most_probe, 1 + (p.probe_gain - 1) * p.probe_growth**self._streak)
            self._set_rate(self.rate * self._step)
        self._next_probe = now + interval
        self._throttles_since_probe = self._answers_since_probe = 0
        self._delivered_since_probe, self._probe_from = 0, now
        self._filled_since_probe = len(self._in_flight) >= self.limit

    def _ready(self, now: float, rtt: float) -> bool:
        """Whether answers since the bucket ran dry cover a round trip: in the span
        between two throttles, or (where throttles come so often that such a span is
        always short: a share of them random) over several round trips since."""
        if self.estimator.ready(now, rtt):
            return True
        return now - self._dry_at >= READY_ROUNDS * rtt and self.estimator.solid(now)

    def _probe_interval(self) -> float:
        base = max(self.profile.probe_interval, self.profile.probe_rounds * self._rtt())
        if self.rate is not None and self.rate < STALE_BACKOFF * self._limit_at:
            # Far below where probes kept finding the limit (others took the bucket for a
            # while, then left it): the probes that found it say nothing of this rate.
            self._backoff = 0
        return base * float(2**self._backoff)

    def _set_rate(self, rate: float) -> None:
        if self.headroom and self.found:
            rate = min(rate, (1.0 - self.headroom) * self.found)
        self.rate = max(rate, self._size / MOST_GAP)
        self.pacer.retime(self.rate)
        p = self.profile
        cap = cap_for(self.rate, self._rtt(), self._size, p.cap_gain, p.cap_slack)
        self.cwnd = float(self._clamp(cap))

    def _queued(self) -> bool:
        """Whether answers take far longer than the fastest did: calls wait in a queue at
        the endpoint, and asking for more would only lengthen it."""
        return self.srtt is not None and self.srtt > QUEUED * self._rtt()

    def _srtt(self) -> float:
        # Answers to calls sent over the last smoothed round trip are about half in.
        return self._rtt() if self.srtt is None else max(self.srtt, 1e-3)

    def _rtt(self) -> float:
        return 0.05 if math.isinf(self.min_latency) else max(self.min_latency, 1e-3)

    def _see_latency(self, latency: float, now: float) -> None:
        if latency <= self.min_latency or now - self._min_latency_at > MIN_RTT_SPAN:
            self.min_latency, self._min_latency_at = latency, now
        self.srtt = latency if self.srtt is None else self.srtt + (latency - self.srtt) / 8

    def _clamp(self, value: float) -> int:
        return int(min(max(value, self.profile.min_window), self.profile.max_window))
