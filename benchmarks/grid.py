"""The controller over the whole grid of bucket regimes, in virtual time.

    python benchmarks/grid.py                          # the default profile, 175 regimes x 3 seeds
    python benchmarks/grid.py --profile adaptive --profile reno
    python benchmarks/grid.py --noise 0.2              # a fifth of calls throttled at random
                                                       # (and each regime without it, to compare)
    python benchmarks/grid.py --two-buckets            # EC2's two buckets, --batch-size auto

Every regime is one token bucket of burst B and refill R per second, calls of latency
L +-40%, N = B + 40 R IDs, batch 1 (``benchmarks/sim.py`` drives the real engine and
controller). A regime's figure is its worst seed. The goals: every regime within 1.15x
the bound with at most B + 5% of calls throttled, and a median within 1.05x.

Prints a table per profile (each profile side by side in one run), saves the numbers as
JSON and draws one heatmap (SVG) per profile in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import Best, best_fixed_pace
from sim import Regime, Result, simulate

BURSTS = (1, 3, 20, 100, 1000)
RATES = (0.2, 0.5, 2, 5, 20, 100, 200)
LATENCIES = (0.02, 0.1, 0.3, 1, 2)
SEEDS = (0, 1, 2)
TIME_GOAL = 1.15
MEDIAN_GOAL = 1.05
THROTTLE_SHARE = 0.05
RESULTS = Path(__file__).resolve().parent / "results"


def regimes(noise: float = 0.0, two_buckets: bool = False) -> list[Regime]:
    out = []
    for b, r, lat in itertools.product(BURSTS, RATES, LATENCIES):
        n = int(b + 40 * r)
        if two_buckets:
            # The request bucket as given; an instance bucket 10x its burst and 4x its rate.
            out.append(Regime(b, r, lat, n * 4, batch=None, res_burst=b * 10, res_rate=r * 4))
        else:
            out.append(Regime(b, r, lat, n, noise=noise))
    return out


def _one(args: tuple[Regime, int, str, dict[str, float]]) -> Result:
    regime, seed, profile, overrides = args
    return simulate(regime, seed=seed, profile=profile, overrides=overrides)


Key = tuple[float, float, float]


def _reference(regime: Regime) -> Best:
    return best_fixed_pace(
        regime.burst, regime.rate, regime.latency, regime.n, max_window=regime.max_window
    )


def references(grid: Sequence[Regime], pool: ProcessPoolExecutor) -> dict[Key, float]:
    """The best fixed pace's wall per regime (one bucket only), kept in results/ once made:
    it depends on nothing of swarm's."""
    cache = RESULTS / "oracle.json"
    known: dict[str, float] = json.loads(cache.read_text()) if cache.exists() else {}
    key = lambda g: f"{g.burst:g}/{g.rate:g}/{g.latency:g}/{g.n}"  # noqa: E731
    todo = [g for g in grid if key(g) not in known]
    for g, best in zip(todo, pool.map(_reference, todo), strict=True):
        known[key(g)] = best.wall_s
    if todo:
        RESULTS.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(known, indent=0, sort_keys=True) + "\n")
    return {(g.burst, g.rate, g.latency): known[key(g)] for g in grid}


def throttle_ok(r: Result) -> bool:
    return r.throttled <= r.burst + THROTTLE_SHARE * r.calls


def worst_of(results: list[Result]) -> dict[tuple[float, float, float], Result]:
    worst: dict[tuple[float, float, float], Result] = {}
    for r in results:
        key = (r.burst, r.rate, r.latency)
        w = worst.get(key)
        if w is None or r.ratio > w.ratio:
            # The worst seed's time; its throttles are the worst seed's too.
            worst[key] = r if w is None or r.throttled >= w.throttled else _with(r, w.throttled)
        elif r.throttled > w.throttled:
            worst[key] = _with(w, r.throttled)
    return worst


def _with(r: Result, throttled: int) -> Result:
    return Result(**{**asdict(r), "throttled": throttled})


def summary(
    worst: dict[Key, Result], noise: float, reach: dict[Key, float] | None = None
) -> dict[str, object]:
    ratios = sorted(r.ratio for r in worst.values())
    # With noise, a share of every call is throttled whatever the pace: the goal is
    # that it costs no more than that share of time.
    goal = TIME_GOAL / (1 - noise) if noise else TIME_GOAL
    slow = [r for r in worst.values() if r.ratio > goal]
    loud = [r for r in worst.values() if not noise and not throttle_ok(r)]
    return {
        "regimes": len(worst),
        "over_time_goal": len(slow),
        "over_throttle_goal": len(loud),
        "median": round(statistics.median(ratios), 3),
        "worst": round(ratios[-1], 3),
        "time_goal": round(goal, 3),
        **(_against(worst, reach, goal) if reach else {}),
        "slowest": [asdict(r) for r in sorted(slow, key=lambda r: -r.ratio)[:12]],
        "loudest": [asdict(r) for r in sorted(loud, key=lambda r: r.calls - r.throttled)[:12]],
    }


def _against(worst: dict[Key, Result], reach: dict[Key, float], goal: float) -> dict[str, object]:
    """The same judged against what a fixed pace that knows the refill reaches, where that
    is slower than the bound."""
    out_of_reach = [k for k, r in worst.items() if reach[k] > goal * r.bound_s]
    ratios = {k: r.wall_s / max(r.bound_s, reach[k]) for k, r in worst.items()}
    slow = [k for k, x in ratios.items() if x > goal]
    return {
        "out_of_reach": len(out_of_reach),
        "over_reachable": len(slow),
        "median_reachable": round(statistics.median(ratios.values()), 3),
        "worst_reachable": round(max(ratios.values()), 3),
    }


def against_clean(
    noisy: dict[Key, Result], clean: dict[Key, Result], noise: float
) -> dict[str, object]:
    """Each regime's worst wall with the noise over its worst wall without it: what the
    noise itself cost, apart from how far the regime's bound is out of reach. The noise
    takes ``noise`` of the calls, so 1 / (1 - noise) of the time is what it must cost."""
    goal = 1 / (1 - noise)
    ratios = {k: noisy[k].wall_s / clean[k].wall_s for k in noisy}
    return {
        "own_goal": round(goal, 3),
        "over_own": sum(1 for x in ratios.values() if x > goal),
        "median_own": round(statistics.median(ratios.values()), 3),
        "worst_own": round(max(ratios.values()), 3),
    }


def table(profile: str, worst: dict[tuple[float, float, float], Result], noise: float) -> str:
    """Worst ratio per (burst, rate), the worst over latencies, as a text grid."""
    goal = TIME_GOAL / (1 - noise) if noise else TIME_GOAL
    lines = [f"{profile}: worst wall / bound over latencies (* over {goal:.2f}x, ! throttles)"]
    lines.append("burst \\ rate " + "".join(f"{r:>9g}" for r in RATES))
    for b in BURSTS:
        cells = []
        for r in RATES:
            rows = [worst[(b, r, lat)] for lat in LATENCIES]
            ratio = max(x.ratio for x in rows)
            mark = ("*" if ratio > goal else " ") + (
                "!" if not noise and not all(throttle_ok(x) for x in rows) else " "
            )
            cells.append(f"{ratio:7.2f}{mark}")
        lines.append(f"{b:>12g} " + "".join(cells))
    return "\n".join(lines)


def heatmap(profile: str, worst: dict[tuple[float, float, float], Result], title: str) -> str:
    """One SVG: a panel per latency, burst down, rate across, colour by wall / bound."""
    cell, gap, left, top = 34, 24, 70, 58
    panel_w = cell * len(RATES)
    width = left + len(LATENCIES) * (panel_w + gap)
    height = top + cell * len(BURSTS) + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="10">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="16" font-size="13">{title}</text>',
    ]
    for k, lat in enumerate(LATENCIES):
        x0 = left + k * (panel_w + gap)
        out.append(f'<text x="{x0}" y="{top - 26}" font-size="11">latency {lat:g} s</text>')
        for j, r in enumerate(RATES):
            out.append(
                f'<text x="{x0 + j * cell + cell / 2}" y="{top - 6}" '
                f'text-anchor="middle">{r:g}</text>'
            )
        for i, b in enumerate(BURSTS):
            if k == 0:
                out.append(
                    f'<text x="{left - 6}" y="{top + i * cell + cell / 2 + 3}" '
                    f'text-anchor="end">B {b:g}</text>'
                )
            for j, r in enumerate(RATES):
                res = worst[(b, r, lat)]
                colour = _colour(res.ratio)
                x, y = x0 + j * cell, top + i * cell
                mark = "" if throttle_ok(res) else "!"
                out.append(
                    f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                    f'fill="{colour}"><title>B {b:g}, R {r:g}/s, L {lat:g} s: '
                    f"{res.ratio:.2f}x, {res.throttled} of {res.calls} throttled</title></rect>"
                )
                out.append(
                    f'<text x="{x + cell / 2}" y="{y + cell / 2 + 3}" text-anchor="middle">'
                    f"{res.ratio:.2f}{mark}</text>"
                )
    legend_y = top + cell * len(BURSTS) + 22
    out.append(
        f'<text x="{left}" y="{legend_y}">rate R per s across, burst B down; cell: worst wall / '
        f"bound of 3 seeds; green within {TIME_GOAL}x, red far over; ! throttled more than "
        f"B + 5% of calls</text>"
    )
    out.append("</svg>")
    return "\n".join(out)


def _colour(ratio: float) -> str:
    if ratio <= 1.05:
        return "#4caf50"
    if ratio <= TIME_GOAL:
        return "#a5d6a7"
    if ratio <= 1.5:
        return "#ffcc80"
    if ratio <= 3:
        return "#ff8a65"
    return "#e53935"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--profile",
        action="append",
        help="profiles side by side (default adaptive); NAME:field=value,... tries constants",
    )
    ap.add_argument("--noise", type=float, default=0.0, help="share of calls throttled at random")
    ap.add_argument("--two-buckets", action="store_true")
    ap.add_argument("--seeds", type=int, default=len(SEEDS))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for JSON and SVG")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args(argv)
    profiles = a.profile or ["adaptive"]
    grid = regimes(a.noise, a.two_buckets)
    suffix = ("-noise" if a.noise else "") + ("-two-buckets" if a.two_buckets else "")
    report: dict[str, object] = {}
    with ProcessPoolExecutor(a.jobs) as pool:
        reach = None if a.noise or a.two_buckets else references(grid, pool)
        for profile in profiles:
            name, _, sets = profile.partition(":")
            overrides = {k: float(v) for k, v in (kv.split("=") for kv in sets.split(",") if kv)}
            work = [(g, s, name, overrides) for g in grid for s in range(a.seeds)]
            results = list(pool.map(_one, work, chunksize=4))
            worst = worst_of(results)
            s = summary(worst, a.noise, reach)
            if a.noise:
                # The same regimes and seeds without the noise, side by side.
                calm = [(replace(g, noise=0.0), seed, n, o) for g, seed, n, o in work]
                s.update(
                    against_clean(worst, worst_of(list(pool.map(_one, calm, chunksize=4))), a.noise)
                )
            report[profile] = {"summary": s, "results": [asdict(r) for r in results]}
            print(table(profile, worst, a.noise))
            print(
                f"{profile}: {s['over_time_goal']} of {s['regimes']} regimes over "
                f"{s['time_goal']}x, {s['over_throttle_goal']} over the throttle line, "
                f"median {s['median']}x, worst {s['worst']}x"
            )
            if reach:
                print(
                    f"{profile}: against the best fixed pace that knows the refill where the "
                    f"bound is out of its reach ({s['out_of_reach']} regimes): "
                    f"{s['over_reachable']} over {s['time_goal']}x, median "
                    f"{s['median_reachable']}x, worst {s['worst_reachable']}x"
                )
            if a.noise:
                print(
                    f"{profile}: against its own run without the noise: {s['over_own']} over "
                    f"{s['own_goal']}x, median {s['median_own']}x, worst {s['worst_own']}x"
                )
            print()
            if not a.no_save:
                a.out.mkdir(parents=True, exist_ok=True)
                extra = f" with {a.noise:g} of calls throttled at random" if a.noise else ""
                extra += " (two buckets, batch auto)" if a.two_buckets else ""
                title = (
                    f"profile {profile}{extra}: "
                    f"{s['over_time_goal']} of {s['regimes']} over {s['time_goal']}x, "
                    f"median {s['median']}x"
                )
                (a.out / f"grid-{profile}{suffix}.svg").write_text(heatmap(profile, worst, title))
    if not a.no_save:
        # The profiles not run this time keep their last results.
        path = a.out / f"grid{suffix}.json"
        kept = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**kept, **report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
