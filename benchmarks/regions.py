"""Several regions at once against one after the other: each region has buckets of its
own, so a run over three regions should take about as long as one region alone.

Prints a table; both ways run side by side in one go, against the same sandbox
settings, reset between runs (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import io
import time

from rich.console import Console

from swarm_cli.actions import ACTIONS
from swarm_cli.rehearse import bound_seconds, run_in_sandbox
from swarm_cli.report import Pair
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig
from swarm_cli.window import ADAPTIVE

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2")


def run(config: SandboxConfig, regions: tuple[str, ...], count: int, together: bool) -> float:
    quiet = Console(file=io.StringIO())
    options = RunOptions(batch_size=1, window=ADAPTIVE.bounded(max_window=64), progress="none")
    with Sandbox(config) as box:
        groups = {Pair(None, r): box.launch(count, region=r) for r in regions}
        started = time.monotonic()
        if together:
            report = run_in_sandbox(box, Job(ACTIONS["terminate"], groups, options), quiet)
            assert report.counts["succeeded"] == count * len(regions)
        else:
            for pair, ids in groups.items():
                report = run_in_sandbox(box, Job(ACTIONS["terminate"], {pair: ids}, options), quiet)
                assert report.counts["succeeded"] == count
        return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=300, help="instances per region")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    config = SandboxConfig(
        BucketSpec(20, 50), BucketSpec(100_000, 100_000), latency=0.04, jitter=0.01
    )
    bound = bound_seconds(config, args.count, 1)
    shape = f"{len(REGIONS)} regions x {args.count} instances, batch 1"
    print(f"{shape}; one region's bucket bound {bound:.1f}s")
    print(f"{'round':>5} {'one after the other':>20} {'together':>9} {'speed-up':>9}")
    for k in range(1, args.rounds + 1):
        apart = run(config, REGIONS, args.count, together=False)
        together = run(config, REGIONS, args.count, together=True)
        print(f"{k:>5} {apart:>19.1f}s {together:>8.1f}s {apart / together:>8.2f}x")


if __name__ == "__main__":
    main()
