"""The real engine and controller against simulated token buckets, in virtual time.

    python benchmarks/sim.py --burst B --rate R --latency L [--jitter J] --n N [--seed S]
        [--batch K|auto] [--res-burst RB --res-rate RR] [--max-window W] [--noise P]
        [--shut A B] [--profile NAME] [--headroom F] --json

Each call's latency is uniform in L*[1-J, 1+J]; the bucket(s) are checked when a call is
half-way (sent + latency/2) and the answer, success or throttle, arrives at sent +
latency. ``--res-*`` adds EC2's second bucket, one token per ID. ``--noise P`` answers a
share P of calls with a throttle whatever the buckets hold (an empty 503); ``--shut A B``
throttles every call between A and B seconds (others holding the bucket for a while). Defaults are
``swarm terminate``'s, but batch 1.

The last line printed is one JSON object: {"wall_s", "bound_s", "calls", "throttled",
"done", ...}. ``bound_s`` is the physical limit: the latest of (tokens needed - burst) /
refill + L over the bucket(s) (a call per request token, an ID per resource token) and
calls * L / W, W the largest window (each call holds a slot for its latency).

Nothing of the engine or the controller is copied here: ``swarm_cli.run.new_engine``
builds them as a run does, and ``swarm_cli.runtime.VirtualRuntime`` gives them a clock
on which calls take simulated time.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from swarm_cli.engine import Event
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.run import RunOptions, new_engine
from swarm_cli.runtime import VirtualRuntime
from swarm_cli.window import PROFILES

THROTTLED = Outcome(Kind.THROTTLED, "RequestLimitExceeded", http_status=503)
NOISE = Outcome(Kind.THROTTLED, "HTTP503", http_status=503)
DONE = Outcome(Kind.SUCCEEDED)


@dataclass
class Bucket:
    """A token bucket that refills continuously; a throttled call takes nothing."""

    burst: float
    rate: float
    tokens: float = field(init=False)
    at: float = 0.0

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def level(self, now: float) -> float:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return self.tokens


@dataclass(frozen=True)
class Regime:
    burst: float
    rate: float
    latency: float
    n: int
    jitter: float = 0.4
    batch: int | None = 1  # None: auto
    res_burst: float | None = None
    res_rate: float | None = None
    max_window: int = 500
    noise: float = 0.0
    shut: tuple[float, float] | None = None  # every call throttled from, until (seconds)

    def buckets(self) -> list[tuple[Bucket, bool]]:
        """(bucket, counts IDs) pairs: the request bucket, then the resource one if any."""
        out = [(Bucket(self.burst, self.rate), False)]
        if self.res_burst is not None and self.res_rate is not None:
            out.append((Bucket(self.res_burst, self.res_rate), True))
        return out

    def bound(self) -> float:
        most = self.batch or 1000
        calls = math.ceil(self.n / most)
        worst = calls * self.latency / self.max_window
        for bucket, per_id in self.buckets():
            need = self.n if per_id else calls
            worst = max(worst, max(0.0, need - bucket.burst) / bucket.rate + self.latency)
        if self.shut is not None and self.shut[0] < worst:
            # Nothing gets by while shut, but the request bucket fills meanwhile.
            bucket = self.buckets()[0][0]
            held = self.shut[1] - self.shut[0]
            worst += held - min(bucket.burst, bucket.rate * held) / bucket.rate
        return worst


@dataclass
class Result:
    wall_s: float
    bound_s: float
    calls: int
    throttled: int
    done: int
    ratio: float
    burst: float
    rate: float
    latency: float
    n: int
    seed: int
    profile: str


class Api:
    """The simulated EC2 call: buckets checked when the call is half-way."""

    def __init__(self, regime: Regime, runtime: VirtualRuntime, rng: random.Random) -> None:
        self.buckets = regime.buckets()
        self.noise = regime.noise
        self.shut = regime.shut
        self.runtime = runtime
        self.rng = rng
        self.calls = 0
        self.throttled = 0

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        self.calls += 1
        now = self.runtime.clock()
        if self.shut is not None and self.shut[0] <= now < self.shut[1]:
            self.throttled += 1
            return dict.fromkeys(ids, THROTTLED)
        if self.noise and self.rng.random() < self.noise:
            self.throttled += 1
            return dict.fromkeys(ids, NOISE)
        costs = [len(ids) if per_id else 1 for _, per_id in self.buckets]
        if any(b.level(now) < c for (b, _), c in zip(self.buckets, costs, strict=True)):
            self.throttled += 1
            return dict.fromkeys(ids, THROTTLED)
        for (b, _), c in zip(self.buckets, costs, strict=True):
            b.tokens -= c
        return dict.fromkeys(ids, DONE)


def simulate(
    regime: Regime,
    *,
    seed: int = 0,
    profile: str = "adaptive",
    headroom: float = 0.0,
    log: bool = False,
    overrides: Mapping[str, float] | None = None,
) -> Result:
    rng = random.Random(seed)
    lo, hi = regime.latency * (1 - regime.jitter), regime.latency * (1 + regime.jitter)
    runtime = VirtualRuntime(latency=lambda: rng.uniform(lo, hi))
    api = Api(regime, runtime, rng)
    options = RunOptions(
        batch_size=regime.batch or 10,
        auto_batch=regime.batch is None,
        headroom=headroom,
        window=replace(PROFILES[profile], **(overrides or {})).bounded(
            max_window=regime.max_window
        ),
    )
    subscribers = [_log] if log else []
    engine = new_engine(api, options, subscribers, runtime=runtime)
    result = engine.run([f"i-{k:08x}" for k in range(regime.n)])
    bound = regime.bound()
    return Result(
        wall_s=round(result.elapsed, 4),
        bound_s=round(bound, 4),
        calls=api.calls,
        throttled=api.throttled,
        done=result.counts["succeeded"],
        ratio=round(result.elapsed / bound, 4),
        burst=regime.burst,
        rate=regime.rate,
        latency=regime.latency,
        n=regime.n,
        seed=seed,
        profile=profile,
    )


def _log(event: Event) -> None:
    if event.type in ("window", "throttled"):
        print(
            f"{event.at:9.3f} {event.type:9} cwnd {event.cwnd:7.1f} pace {event.pace:8.4f} "
            f"in flight {event.in_flight:4} {event.phase}",
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--burst", type=float, required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--latency", type=float, required=True)
    ap.add_argument("--jitter", type=float, default=0.4)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", default="1", help="IDs per call, or auto")
    ap.add_argument("--res-burst", type=float)
    ap.add_argument("--res-rate", type=float)
    ap.add_argument("--max-window", type=int, default=500)
    ap.add_argument("--noise", type=float, default=0.0, help="share of calls throttled at random")
    ap.add_argument(
        "--shut",
        type=float,
        nargs=2,
        metavar=("FROM", "UNTIL"),
        help="every call throttled between these times (others hold the bucket)",
    )
    ap.add_argument("--profile", default="adaptive", choices=sorted(PROFILES))
    ap.add_argument("--headroom", type=float, default=0.0)
    ap.add_argument("--log", action="store_true", help="the controller's changes on stderr")
    ap.add_argument("--json", action="store_true", help="end with one JSON line (always)")
    a = ap.parse_args(argv)
    regime = Regime(
        a.burst,
        a.rate,
        a.latency,
        a.n,
        a.jitter,
        None if a.batch == "auto" else int(a.batch),
        a.res_burst,
        a.res_rate,
        a.max_window,
        a.noise,
        None if a.shut is None else (a.shut[0], a.shut[1]),
    )
    r = simulate(regime, seed=a.seed, profile=a.profile, headroom=a.headroom, log=a.log)
    if not a.json:
        print(
            f"{r.done}/{regime.n} done in {r.wall_s:.2f}s (bound {r.bound_s:.2f}s, "
            f"{r.ratio:.2f}x), {r.calls} calls, {r.throttled} throttled"
        )
    print(json.dumps(asdict(r)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
