"""Two runs on one bucket in the same virtual time (benchmarks/fair.py): both finish,
their shares add up, and a seed gives the same run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from fair import Case, Lane, SharedClock, run_case  # noqa: E402


@pytest.mark.parametrize("late", [0.0, 0.25])
def test_two_runs_on_one_bucket_both_finish(late: float) -> None:
    case = Case(3, 20, 0.05, 200, late=late)
    r = run_case(case, seed=1, keep=True)
    assert r.done == 400
    assert r.calls == r.done + r.throttled
    assert sum(r.shares) == pytest.approx(1.0, abs=1e-3)
    assert min(r.shares) > 0
    # The bucket pays 20 a second whoever calls: both together take at least the bound.
    assert r.wall_s >= r.bound_s
    # No success beat the bucket: over any stretch, at most the burst and the refill.
    both = sorted(t for times in r.ok_at for t in times)
    assert len(both) == 400
    for a, b in zip(both, both[50:], strict=False):
        assert 3 + 20 * (b - a) + 1e-9 >= 51, "51 successes need 48 tokens of refill"
    if late:
        assert min(r.ok_at[1]) >= case.delay()
        assert r.overlap_s < r.walls[0]


def test_the_same_seed_gives_the_same_pair_of_runs() -> None:
    case = Case(20, 5, 0.1, 120, late=0.25)
    assert run_case(case, seed=2) == run_case(case, seed=2)


def test_the_clock_runs_each_lane_in_time_order() -> None:
    shared = SharedClock(lambda: 1.0)
    seen: list[tuple[str, float]] = []

    def waits(name: str, lane: Lane, gaps: list[float]) -> Callable[[], str]:
        def go() -> str:
            cond = threading.Condition()
            for gap in gaps:
                with cond:
                    lane.wait(cond, gap)
                seen.append((name, lane.clock()))
            return name

        return go

    a, b = shared.lane(), shared.lane()
    out = shared.run([(a, 0.0, waits("a", a, [1, 1, 1])), (b, 0.5, waits("b", b, [1, 1]))])
    assert out == ["a", "b"]
    assert seen == [("a", 1.0), ("b", 1.5), ("a", 2.0), ("b", 2.5), ("a", 3.0)]


def test_the_command_prints_one_regime_as_json() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fair.py"),
            "--one",
            "3",
            "20",
            "0.05",
            "--n",
            "60",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    r = json.loads(out.splitlines()[-1])
    assert r["done"] == 120
    assert len(r["shares"]) == 2
