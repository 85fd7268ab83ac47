"""How long to wait for one call: TCP's retransmission timeout, from measured round trips.

Pure: samples and time-outs come in as calls, nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

# The least a call is waited for by default, however fast the answers before it.
FLOOR = 2.0


@dataclass
class Rto:
    """RFC 6298's estimator: smoothed round trip plus four times its variation.

    ``floor`` keeps a burst of fast answers from making the next slow-but-healthy
    call look dead; ``ceiling`` bounds the wait on an endpoint that never answers.
    Each time-out doubles the timeout (Karn's backoff) until an answer comes.
    """

    floor: float = FLOOR
    ceiling: float = 30.0
    initial: float = 5.0
    srtt: float | None = None
    rttvar: float = 0.0
    backoff: int = 0

    def sample(self, rtt: float) -> None:
        """An answered call took ``rtt`` seconds."""
        rtt = max(0.0, rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.backoff = 0

    def on_timeout(self) -> None:
        """A call got no answer in time: wait twice as long next time."""
        if self.timeout() < self.ceiling:
            self.backoff += 1

    def timeout(self) -> float:
        # Samples come per call, not per round trip: a run of calls near the mean shrinks
        # the variation within one round trip, and the slow end of healthy latencies
        # would time out. A call is late only past twice the smoothed round trip.
        base = (
            self.initial if self.srtt is None else max(self.srtt + 4 * self.rttvar, 2 * self.srtt)
        )
        return float(min(self.ceiling, max(self.floor, base) * 2.0**self.backoff))


@dataclass(frozen=True)
class FixedTimeout:
    """``--call-timeout``: the same wait for every call, whatever the endpoint shows."""

    seconds: float

    def sample(self, rtt: float) -> None:
        return None

    def on_timeout(self) -> None:
        return None

    def timeout(self) -> float:
        return self.seconds
