"""The real engine and controller in virtual time (benchmarks/sim.py): deterministic,
nothing lost, and the regimes the controller was built for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from sim import Regime, simulate  # noqa: E402


def test_the_same_seed_gives_the_same_run() -> None:
    regime = Regime(20, 5, 0.1, 220)
    assert simulate(regime, seed=3) == simulate(regime, seed=3)


@pytest.mark.parametrize("profile", ["adaptive", "seed", "reno"])
def test_every_profile_finishes_every_id(profile: str) -> None:
    r = simulate(Regime(3, 20, 0.05, 300), seed=1, profile=profile)
    assert r.done == 300
    assert r.calls == r.done + r.throttled


def test_a_stingy_bucket_runs_near_its_bound() -> None:
    """Burst 3, half a call a second, 100 ms: 0.2's default took 7x its bound here."""
    r = simulate(Regime(3, 0.5, 0.1, 40), seed=0)
    assert r.done == 40
    assert r.ratio <= 1.2


@pytest.mark.parametrize(("burst", "rate", "latency"), [(100, 20, 0.02), (100, 2, 0.1)])
def test_a_burst_spent_at_the_startups_pace_throttles_within_the_line(
    burst: float, rate: float, latency: float
) -> None:
    """The calls on their way when the burst runs dry say what share the refill lets
    through, and the pace follows them down; once at the refill, a decrease goes to what
    got through: B + 5% of calls throttled at most, at the bound's pace."""
    n = int(burst + 40 * rate)
    r = simulate(Regime(burst, rate, latency, n), seed=0)
    assert r.done == n
    assert r.throttled <= burst + 0.05 * r.calls
    assert r.ratio <= 1.05


def test_random_throttles_do_not_stall_the_run() -> None:
    """A fifth of calls throttled at random behind a generous bucket."""
    r = simulate(Regime(100, 100, 0.02, 300, noise=0.2), seed=0)
    assert r.done == 300
    assert r.ratio <= 1.5


@pytest.mark.parametrize("shut", [(0.0, 10.0), (3.0, 13.0)])
def test_a_stretch_that_throttles_every_call_is_left_as_soon_as_it_ends(
    shut: tuple[float, float],
) -> None:
    """Others hold a bucket of 100 a second for ten seconds, from the start or midway:
    once they let go, the run is back at the refill within a few round trips (it took a
    minute climbing a probe at a time from the pace the throttles left, or went on
    throttling half its calls, taken for noise)."""
    r = simulate(Regime(100, 100, 0.02, 2000, shut=shut), seed=0)
    assert r.done == 2000
    assert r.ratio <= 1.15, r
    assert r.throttled <= 0.3 * r.calls, r


def test_two_buckets_with_auto_batches_finish() -> None:
    r = simulate(Regime(20, 5, 0.05, 2000, batch=None, res_burst=200, res_rate=20), seed=0)
    assert r.done == 2000
    assert r.ratio <= 1.3


def test_the_command_line_ends_with_one_json_object() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "sim.py"),
            "--burst",
            "3",
            "--rate",
            "2",
            "--latency",
            "0.1",
            "--n",
            "20",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    last = json.loads(out.strip().splitlines()[-1])
    assert set(last) >= {"wall_s", "bound_s", "calls", "throttled", "done"}
    assert last["done"] == 20
    assert last["bound_s"] == pytest.approx((20 - 3) / 2 + 0.1)


def test_the_noise_grid_judges_each_regime_against_itself_without_the_noise() -> None:
    from grid import against_clean
    from sim import Result

    def result(wall: float, burst: float) -> Result:
        return Result(wall, 10.0, 100, 0, 100, wall / 10, burst, 5, 0.1, 100, 0, "adaptive")

    clean = {(b, 5.0, 0.1): result(20.0, b) for b in (1, 3, 20)}
    # Out of the bound's reach with or without the noise, but the noise cost only 1.2x.
    noisy = {(1, 5.0, 0.1): result(24.0, 1), (3, 5.0, 0.1): result(30.0, 3)}
    noisy[(20, 5.0, 0.1)] = result(21.0, 20)
    s = against_clean(noisy, clean, 0.2)
    assert s == {"own_goal": 1.25, "over_own": 1, "median_own": 1.2, "worst_own": 1.5}
