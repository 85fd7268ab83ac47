"""What gets through: the refill, measured between two throttles.

A throttle says the bucket was empty when that call reached it. Between two calls that
found it empty, every token the refill added was spent by a success (the bucket holds no
more than it held before), so the IDs that succeeded in calls sent between them, over
the time between them, is the refill's rate, whatever the pace was meanwhile. The span
used is the latest one that holds enough successes; with few (a slow refill) the
estimate counts one call more than it saw, over the time since, so it stays above what
was seen and sinks as time passes without a success: calls keep arriving soon after
each token, and the gaps between them double while none comes.
"""

from __future__ import annotations

import bisect
import math

# Successes a span should hold before a later, shorter one is trusted over it.
FEW = 16
KEEP_SUCCESSES = 4096
SLOWEST_DECAY = 0.99  # per answer: the longest latency seen fades
KEEP_THROTTLES = 4096


class DeliveryEstimator:
    def __init__(self, few: int = FEW) -> None:
        self.few = few
        self._ok_at: list[float] = []  # send times of successful calls, in order
        self._ok_ids: list[int] = []  # their IDs, in the same order
        self._throttled_at: list[float] = []  # send times of throttled calls, in order
        self._last_sent = -math.inf  # when the latest answered call left
        self._slowest = 0.0  # the longest recent answer: calls sent since may be unanswered
        # One answer's handling asks for the span several times (rate, upper, solid): it
        # is worked out once per answer and moment.
        self._spans: dict[bool, tuple[float, tuple[float, int, float, int] | None]] = {}

    @property
    def started(self) -> bool:
        """Whether a throttle has shown the bucket empty yet."""
        return bool(self._throttled_at)

    def reset(self) -> None:
        self._ok_at.clear()
        self._ok_ids.clear()
        self._throttled_at.clear()
        self._last_sent = -math.inf
        self._spans.clear()

    def on_answer(self, sent_at: float, ids: int, ok: bool, latency: float = 0.0) -> None:
        """A call that left at ``sent_at`` was answered after ``latency``: ok or throttled.

        It met the bucket about half-way: calls of uneven latency do not arrive in the
        order they left, and over a short span the order they arrived in is what counts.
        """
        sent_at += latency / 2
        self._spans.clear()
        self._last_sent = max(self._last_sent, sent_at)
        self._slowest = max(latency / 2, self._slowest * SLOWEST_DECAY)
        if ok:
            k = bisect.bisect(self._ok_at, sent_at)
            self._ok_at.insert(k, sent_at)
            self._ok_ids.insert(k, ids)
            if len(self._ok_at) > KEEP_SUCCESSES:
                del self._ok_at[: KEEP_SUCCESSES // 4], self._ok_ids[: KEEP_SUCCESSES // 4]
        else:
            bisect.insort(self._throttled_at, sent_at)
            if len(self._throttled_at) > KEEP_THROTTLES:
                del self._throttled_at[: KEEP_THROTTLES // 4]

    def _ok_between(self, a: float, b: float) -> int:
        """IDs in the successful calls that met the bucket between ``a`` and ``b``."""
        i = bisect.bisect_right(self._ok_at, a)
        j = bisect.bisect_left(self._ok_at, b)
        return sum(self._ok_ids[i:j])

    def _calls_between(self, a: float, b: float) -> int:
        """Successful calls that met the bucket between ``a`` and ``b``: what says how
        much a span has seen (a call of many IDs is still one sample of the refill)."""
        return bisect.bisect_left(self._ok_at, b) - bisect.bisect_right(self._ok_at, a)

    def _span(self, now: float, extend: bool = False) -> tuple[float, int, float, int] | None:
        known = self._spans.get(extend)
        if known is None or known[0] != now:
            known = self._spans[extend] = (now, self._work_out_span(now, extend))
        return known[1]

    def _work_out_span(self, now: float, extend: bool) -> tuple[float, int, float, int] | None:
        """(start, IDs succeeded since, seconds since, calls that did) of the span to
        trust: between two throttles when enough successful calls lie between them (the
        bucket was empty at both ends, and every token in between went to a success),
        else from the earliest
        throttle on, or with ``extend``, up to what has settled."""
        # Calls that met the bucket since the slowest answer's time ago may still be on
        # their way: a span ending there would count only the fast ones.
        settled = now - self._slowest
        thr = self._throttled_at
        n = bisect.bisect_right(thr, settled)
        if not n:
            return None
        last = thr[n - 1]
        start = thr[0]
        # The latest throttle with ``few`` successful calls between it and the last: one
        # before the few-th success before the last.
        j = bisect.bisect_left(self._ok_at, last)
        if j >= self.few:
            k = bisect.bisect_left(thr, self._ok_at[j - self.few], 0, n - 1)
            if k:
                start = thr[k - 1]
        calls = self._calls_between(start, last)
        if calls >= self.few and not extend:
            # Past the last throttle the bucket may have filled again: that says nothing
            # of the refill.
            return start, self._ok_between(start, last), last - start, calls
        # With few successes, those past the last throttle up to what has settled count
        # too: a slow refill's estimate sinks while none comes.
        end = max(min(self._last_sent, settled), last)
        return start, self._ok_between(start, end), end - start, self._calls_between(start, end)

    def solid(self, now: float) -> bool:
        """Whether the span holds enough successes to stand for the refill."""
        got = self._span(now)
        return got is not None and got[3] >= self.few

    def ready(self, now: float, rtt: float) -> bool:
        """Whether answers to calls sent since the bucket ran dry cover a round trip yet."""
        got = self._span(now, extend=True)
        return got is not None and got[2] >= rtt

    def rate(self, now: float, rtt: float) -> float:
        """IDs per second the refill has been paying for (0 before any throttle)."""
        got = self._span(now)
        return 0.0 if got is None else got[1] / self._seconds(got, rtt)

    def upper(self, now: float, rtt: float, size: int) -> float:
        """The rate with one more call of ``size`` IDs (infinite before any throttle)."""
        got = self._span(now)
        return math.inf if got is None else (got[1] + size) / self._seconds(got, rtt)

    def _seconds(self, span: tuple[float, int, float, int], rtt: float) -> float:
        # Enough successes time the refill over however short a span; with few, a span
        # under a round trip says little, and the round trip stands for it.
        return max(span[2], 1e-3) if span[3] >= self.few else max(span[2], rtt, 1e-3)
