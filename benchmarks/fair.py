"""Two runs on one bucket, in the same virtual time: does each get a fair share?

    python benchmarks/fair.py                    # the grid below, adaptive, 3 seeds
    python benchmarks/fair.py --profile reno --seeds 1
    python benchmarks/fair.py --one 20 2 0.3 --late 0.25 --seed 1   # one regime, one seed
    python benchmarks/fair.py --save             # also writes benchmarks/results/fair.json

Two engines, each with its own controller and its own N IDs, run against ONE token bucket
of burst B and refill R per second (calls of latency L +-40%, batch 1), either started
together or the second a share of the first's bound later. Each is the real engine and
controller (``swarm_cli.run.new_engine``, as ``benchmarks/sim.py`` builds them); each runs
on its own thread, and a shared discrete-event clock lets one thread at a time go, so a
seed gives the same run every time.

Per regime it prints, over seeds: each run's share of the successful calls while both were
running (the goal: 40-60%), the total wall against the bound for 2N, and the share of calls
throttled. N is B + 40 R, as in ``benchmarks/grid.py``.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import itertools
import json
import os
import random
import statistics
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim import Api, Bucket, Regime

from swarm_cli.engine import Engine, RunResult
from swarm_cli.outcome import Kind
from swarm_cli.run import RunOptions, new_engine
from swarm_cli.window import PROFILES

T = TypeVar("T")

BURSTS = (3, 20, 100, 1000)
RATES = (0.5, 2, 20, 100)
LATENCIES = (0.02, 0.3, 2)
SEEDS = (0, 1, 2)
LATE = 0.25  # the second run starts this share of the first's bound after it
FAIR = (0.4, 0.6)
RESULTS = Path(__file__).resolve().parent / "results"


class SharedClock:
    """One virtual clock for several engines, each on its own thread; one thread goes at
    a time. Each engine sees it through a :class:`Lane` (its runtime). When the running
    thread waits, the earliest thing due anywhere goes next: an event of some engine (a
    call meeting the bucket half-way, or its answer), run in that engine's thread, or an
    engine's wait running out. Ties go to events, then to the lane added first."""

    def __init__(self, latency: Callable[[], float]) -> None:
        self.latency = latency
        self.now = 0.0
        self._order = itertools.count()
        self._baton = threading.Condition()
        self._turn: int | None = None
        self._events: dict[int, list[tuple[float, int, Callable[[], None]]]] = {}
        self._waiting: dict[int, float] = {}  # lane -> when its wait runs out
        self._granted: dict[int, Callable[[], None] | None] = {}

    def lane(self) -> Lane:
        k = len(self._events)
        self._events[k] = []
        return Lane(self, k)

    def run(self, bodies: Sequence[tuple[Lane, float, Callable[[], T]]]) -> list[T]:
        """Run each body on its lane's thread from its start time; returns their results."""
        out: list[Any] = [None] * len(bodies)
        errors: list[BaseException] = []

        def go(lane: Lane, body: Callable[[], T]) -> None:
            try:
                lane.wait_turn()
                out[lane.k] = body()  # lanes are numbered 0, 1, ... as made
            except BaseException as err:
                errors.append(err)
            finally:
                lane.leave()

        threads = []
        for lane, start, body in bodies:
            self._waiting[lane.k] = start
            threads.append(threading.Thread(target=go, args=(lane, body), daemon=True))
        for t in threads:
            t.start()
        with self._baton:
            self._pass()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return out

    def _pass(self) -> None:
        """Give the baton to whatever is due first (called with ``_baton`` held)."""
        best: tuple[float, int, int, int] | None = None
        for k, wake in self._waiting.items():
            events = self._events[k]
            if events and events[0][0] <= wake:
                cand = (events[0][0], 0, events[0][1], k)
            else:
                cand = (wake, 1, k, k)
            if best is None or cand < best:
                best = cand
        if best is None:
            self._turn = None
            return
        when, kind, _, k = best
        self.now = max(self.now, when)
        self._granted[k] = heapq.heappop(self._events[k])[2] if kind == 0 else None
        del self._waiting[k]
        self._turn = k
        self._baton.notify_all()


@dataclass
class Lane:
    """One engine's runtime on a :class:`SharedClock`."""

    shared: SharedClock
    k: int

    def clock(self) -> float:
        return self.shared.now

    def wait_turn(self) -> None:
        s = self.shared
        with s._baton:
            while s._turn != self.k:
                s._baton.wait()
            event = s._granted.pop(self.k)
        if event is not None:
            event()

    def wait(self, cond: threading.Condition, timeout: float) -> None:
        s = self.shared
        with s._baton:
            s._waiting[self.k] = s.now + max(0.0, timeout)
            s._pass()
        self.wait_turn()

    def leave(self) -> None:
        s = self.shared
        with s._baton:
            s._events[self.k].clear()
            s._waiting.pop(self.k, None)
            s._pass()

    def at(self, when: float, event: Callable[[], None]) -> None:
        s = self.shared
        heapq.heappush(s._events[self.k], (max(when, s.now), next(s._order), event))

    def submit(self, work: Callable[[], T], done: Callable[[T], None]) -> None:
        latency = max(0.0, self.shared.latency())
        sent = self.shared.now
        box: list[Any] = []
        self.at(sent + latency / 2, lambda: box.append(work()))
        self.at(sent + latency, lambda: done(box[0]))

    def shutdown(self) -> None:
        self.shared._events[self.k].clear()


@dataclass(frozen=True)
class Case:
    burst: float
    rate: float
    latency: float
    n: int  # IDs per run
    late: float = 0.0  # the second starts this share of the first's bound later
    jitter: float = 0.4
    max_window: int = 500

    def single(self) -> Regime:
        return Regime(self.burst, self.rate, self.latency, self.n, self.jitter)

    def delay(self) -> float:
        return self.late * self.single().bound()

    def bound(self) -> float:
        """The physical limit for both: 2N tokens from one bucket, and each run's N calls
        through its own window, the second's from when it starts."""
        both = Regime(self.burst, self.rate, self.latency, 2 * self.n, self.jitter)
        windows = self.n * self.latency / self.max_window
        return max(both.bound(), self.delay() + windows + self.latency)


@dataclass
class FairResult:
    burst: float
    rate: float
    latency: float
    n: int
    late: float
    seed: int
    profile: str
    shares: list[float]  # each run's share of the successes while both ran
    overlap_s: float  # how long both ran
    both_ok: int  # successes while both ran
    walls: list[float]  # each run's own wall, from its start
    wall_s: float  # from the first start to the last end
    bound_s: float
    ratio: float
    calls: int
    throttled: int
    done: int
    ok_at: list[list[float]] = field(default_factory=list, repr=False)


class _Recording(Api):
    """The simulated call, on a bucket shared with the other run; keeps when each success
    met it."""

    def __init__(self, case: Case, lane: Lane, rng: random.Random, buckets: list[Any]) -> None:
        super().__init__(case.single(), lane, rng)  # type: ignore[arg-type]
        self.buckets = buckets
        self.ok_at: list[float] = []

    def __call__(self, ids: Sequence[str]) -> Any:
        out = super().__call__(ids)
        if next(iter(out.values())).kind is Kind.SUCCEEDED:
            self.ok_at.append(self.runtime.clock())
        return out


def run_case(
    case: Case, *, seed: int = 0, profile: str = "adaptive", keep: bool = False
) -> FairResult:
    """Both runs to the end; deterministic per seed."""
    rng = random.Random(seed)
    lo, hi = case.latency * (1 - case.jitter), case.latency * (1 + case.jitter)
    shared = SharedClock(lambda: rng.uniform(lo, hi))
    buckets = [(Bucket(case.burst, case.rate), False)]
    options = RunOptions(
        batch_size=1,
        window=PROFILES[profile].bounded(max_window=case.max_window),
    )
    apis: list[_Recording] = []
    bodies: list[tuple[Lane, float, Callable[[], RunResult]]] = []
    starts = (0.0, case.delay())
    for k, start in enumerate(starts):
        lane = shared.lane()
        api = _Recording(case, lane, rng, buckets)
        apis.append(api)
        engine = new_engine(api, options, runtime=lane)
        ids = [f"i-{k}{j:07x}" for j in range(case.n)]
        bodies.append((lane, start, _running(engine, ids)))
    results = shared.run(bodies)
    ends = [s + r.elapsed for s, r in zip(starts, results, strict=True)]
    lo_t, hi_t = max(starts), min(ends)
    counts = [bisect.bisect_right(a.ok_at, hi_t) - bisect.bisect_left(a.ok_at, lo_t) for a in apis]
    total = sum(counts)
    shares = [round(c / total, 4) if total else 0.5 for c in counts]
    wall = max(ends)
    bound = case.bound()
    return FairResult(
        burst=case.burst,
        rate=case.rate,
        latency=case.latency,
        n=case.n,
        late=case.late,
        seed=seed,
        profile=profile,
        shares=shares,
        overlap_s=round(max(0.0, hi_t - lo_t), 4),
        both_ok=total,
        walls=[round(r.elapsed, 4) for r in results],
        wall_s=round(wall, 4),
        bound_s=round(bound, 4),
        ratio=round(wall / bound, 4),
        calls=sum(a.calls for a in apis),
        throttled=sum(a.throttled for a in apis),
        done=sum(r.counts["succeeded"] for r in results),
        ok_at=[a.ok_at for a in apis] if keep else [],
    )


def _running(engine: Engine, ids: list[str]) -> Callable[[], RunResult]:
    return lambda: engine.run(ids)


def cases(late: float = LATE) -> list[Case]:
    out = []
    for b, r, lat in itertools.product(BURSTS, RATES, LATENCIES):
        n = int(b + 40 * r)
        out.append(Case(b, r, lat, n))
        out.append(Case(b, r, lat, n, late=late))
    return out


def _one(args: tuple[Case, int, str]) -> FairResult:
    case, seed, profile = args
    return run_case(case, seed=seed, profile=profile)


def fair(share: float) -> bool:
    return FAIR[0] <= share <= FAIR[1]


def report(outcomes: Sequence[FairResult]) -> tuple[str, dict[str, object]]:
    """A line per regime (its seeds side by side), then a summary."""
    groups: dict[tuple[float, float, float, float], list[FairResult]] = {}
    for o in outcomes:
        groups.setdefault((o.late, o.burst, o.rate, o.latency), []).append(o)
    lines = [
        "late    B      R     L  | first's share per seed (goal 40-60%) | wall/bound (worst) "
        "| throttled",
    ]
    unfair = []
    for (late, b, r, lat), group in sorted(groups.items()):
        firsts = [o.shares[0] for o in group]
        bad = [s for s in firsts if not fair(s)]
        if bad:
            unfair.append((late, b, r, lat))
        cells = " ".join(f"{100 * s:5.1f}{'*' if not fair(s) else ' '}" for s in firsts)
        calls = sum(o.calls for o in group)
        thr = sum(o.throttled for o in group) / max(calls, 1)
        worst = max(o.ratio for o in group)
        lines.append(
            f"{late:4g} {b:5g} {r:6g} {lat:5g}  | {cells:36} | {worst:7.2f}x          "
            f"| {100 * thr:5.1f}%"
        )
    deviations = [abs(o.shares[0] - 0.5) for o in outcomes]
    ratios = [o.ratio for o in outcomes]
    unfair_runs = sum(not fair(o.shares[0]) for o in outcomes)
    throttled = sum(o.throttled for o in outcomes) / max(1, sum(o.calls for o in outcomes))
    lost = sum(2 * o.n - o.done for o in outcomes)
    summary: dict[str, object] = {
        "runs": len(outcomes),
        "regimes": len(groups),
        "unfair_runs": unfair_runs,
        "unfair_regimes": len(unfair),
        "median_deviation": round(statistics.median(deviations), 4),
        "worst_deviation": round(max(deviations), 4),
        "median_ratio": round(statistics.median(ratios), 3),
        "worst_ratio": round(max(ratios), 3),
        "throttled_share": round(throttled, 4),
        "lost": lost,
    }
    lines.append(
        f"{unfair_runs} of {len(outcomes)} runs ({len(unfair)} of {len(groups)} regimes) "
        f"outside 40-60%; |share - 50%| median {100 * statistics.median(deviations):.1f} "
        f"points, worst {100 * max(deviations):.1f}; wall/bound median "
        f"{statistics.median(ratios):.3f}x, worst {max(ratios):.3f}x; "
        f"{100 * throttled:.1f}% of calls throttled; {lost} IDs not done"
    )
    return "\n".join(lines), summary


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--profile", default="adaptive", choices=sorted(PROFILES))
    ap.add_argument("--seeds", type=int, default=len(SEEDS))
    ap.add_argument("--late", type=float, default=LATE, help="the second run's delay, of a bound")
    ap.add_argument("--one", nargs=3, type=float, metavar=("B", "R", "L"), help="one regime")
    ap.add_argument("--n", type=int, help="IDs per run (default B + 40 R)")
    ap.add_argument("--seed", type=int, default=0, help="with --one")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--save", action="store_true", help="write results/fair.json")
    a = ap.parse_args(argv)
    if a.one:
        b, r, lat = a.one
        case = Case(b, r, lat, a.n or int(b + 40 * r), late=a.late)
        o = run_case(case, seed=a.seed, profile=a.profile)
        print(json.dumps({k: v for k, v in asdict(o).items() if k != "ok_at"}))
        return 0
    grid = cases(a.late)
    work = [(c, s, a.profile) for c in grid for s in range(a.seeds)]
    with ProcessPoolExecutor(a.jobs) as pool:
        outcomes = list(pool.map(_one, work, chunksize=2))
    text, summary = report(outcomes)
    print(f"profile {a.profile}")
    print(text)
    if a.save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        data = {
            "profile": a.profile,
            "summary": summary,
            "table": text.splitlines(),
            "runs": [{k: v for k, v in asdict(o).items() if k != "ok_at"} for o in outcomes],
        }
        (RESULTS / "fair.json").write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
