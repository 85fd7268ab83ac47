"""How long an intent waits for its next try after a transient error.

Full jitter, as in AWS's "Exponential Backoff and Jitter": after the n-th error, a
wait drawn uniformly from [0, min(cap, base * 2**(n-1))]. Spreading the retries of
many intents over the whole interval keeps them from coming back at once.

This is the formula only, with its random source handed in. The schedule is the
engine's: each intent's retries wait in its queue on the engine's clock (real or
virtual), beside calls, throttles and outages that a retry loop around one call
could not see, and ``max_attempts`` bounds them there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

BASE = 0.25  # seconds: the widest wait after the first error
CAP = 10.0  # seconds: no wait is drawn from a wider interval than this
_EXPONENT_MOST = 64  # 2**64 times any sensible base is past any cap (and no overflow)


@dataclass(frozen=True)
class FullJitter:
    """Waits of full jitter: uniform in [0, min(cap, base * 2**(attempt-1))]."""

    base: float = BASE
    cap: float = CAP
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def ceiling(self, attempt: int) -> float:
        """The widest wait after the ``attempt``-th error (the first is 1)."""
        return min(self.cap, self.base * 2.0 ** min(attempt - 1, _EXPONENT_MOST))

    def __call__(self, attempt: int) -> float:
        """A wait after the ``attempt``-th error, in seconds."""
        return self.rng.uniform(0.0, self.ceiling(attempt))


# The engine's default: a generator of its own, seeded by the system.
default_backoff = FullJitter()
