"""Side by side against the sandbox: swarm's window profiles and a plain thread pool.

Every contender terminates the same number of fresh instances behind the same
token buckets, one after the other in one process, so the ratios between them
hold even on a busy machine. Prints one table per scenario.

    python benchmarks/compare.py                 # all scenarios
    python benchmarks/compare.py --scenario quick --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from swarm_cli.ec2 import Terminate, make_client
from swarm_cli.engine import Engine
from swarm_cli.rehearse import bound_seconds
from swarm_cli.sandbox import CREDENTIALS, BucketSpec, Sandbox, SandboxConfig
from swarm_cli.stats import Stats
from swarm_cli.window import ADAPTIVE, SEED, Window, WindowProfile


@dataclass(frozen=True)
class Scenario:
    name: str
    config: SandboxConfig
    instances: int
    batch_size: int


SCENARIOS = {
    "quick": Scenario(
        "quick",
        SandboxConfig(BucketSpec(20, 50), BucketSpec(10**6, 10**6), latency=0.04, jitter=0.01),
        300,
        1,
    ),
    "slow-api": Scenario(
        "slow-api",
        SandboxConfig(BucketSpec(40, 60), BucketSpec(10**6, 10**6), latency=0.3, jitter=0.03),
        400,
        1,
    ),
    "high-ceiling": Scenario(
        "high-ceiling",
        SandboxConfig(BucketSpec(50, 100), BucketSpec(10**6, 10**6), latency=0.3, jitter=0.03),
        800,
        1,
    ),
    # Fewer calls per second than one call in flight makes: the window sits at its floor.
    "below-one": Scenario(
        "below-one",
        SandboxConfig(BucketSpec(10, 4), BucketSpec(10**6, 10**6), latency=0.05, jitter=0.01),
        70,
        1,
    ),
    "batched": Scenario(
        "batched",
        SandboxConfig(BucketSpec(20, 10), BucketSpec(200, 100), latency=0.05, jitter=0.01),
        800,
        10,
    ),
}


@dataclass
class Row:
    wall: float
    lost: int
    throttled: int
    calls: int


def run_swarm(box: Sandbox, ids: list[str], profile: WindowProfile, batch: int) -> Row:
    client = make_client(
        box.config.region, endpoint_url=box.endpoint, max_pool=64, credentials=CREDENTIALS
    )
    stats = Stats()
    start = time.monotonic()
    result = Engine(Terminate(client), Window(profile), batch_size=batch, subscribers=[stats]).run(
        ids
    )
    wall = time.monotonic() - start
    lost = len(ids) - result.counts["succeeded"]
    return Row(wall, lost, stats.throttled_calls, stats.calls)


def run_pool(box: Sandbox, ids: list[str], retries: dict[str, Any], batch: int) -> Row:
    """What users write today: N threads, botocore's retries, no window."""
    client = boto3.client(
        "ec2",
        region_name=box.config.region,
        endpoint_url=box.endpoint,
        config=Config(retries=retries, max_pool_connections=32),
        **CREDENTIALS,
    )
    before = box.counters.throttled + box.counters.accepted
    throttled_before = box.counters.throttled
    batches = [ids[k : k + batch] for k in range(0, len(ids), batch)]

    def one(chunk: list[str]) -> int:
        try:
            client.terminate_instances(InstanceIds=chunk)
            return 0
        except ClientError:
            return len(chunk)

    start = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        lost = sum(pool.map(one, batches))
    wall = time.monotonic() - start
    calls = box.counters.throttled + box.counters.accepted - before
    return Row(wall, lost, box.counters.throttled - throttled_before, calls)


Contender = Callable[[Sandbox, list[str], int], Row]
CONTENDERS: dict[str, Contender] = {
    "pool(32) + standard": lambda b, i, n: run_pool(b, i, {"mode": "standard"}, n),
    "pool(32) + adaptive": lambda b, i, n: run_pool(b, i, {"mode": "adaptive"}, n),
    "swarm seed": lambda b, i, n: run_swarm(b, i, SEED.bounded(max_window=64), n),
    "swarm adaptive": lambda b, i, n: run_swarm(b, i, ADAPTIVE.bounded(max_window=64), n),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--repeat", type=int, default=1, help="runs per contender (median)")
    parser.add_argument("--only", action="append", choices=sorted(CONTENDERS))
    args = parser.parse_args()
    for name in args.scenario or list(SCENARIOS):
        sc = SCENARIOS[name]
        bound = bound_seconds(sc.config, sc.instances, sc.batch_size)
        r = sc.config.requests
        print(
            f"\n{sc.name}: {sc.instances} instances, batch {sc.batch_size}, requests "
            f"{r.burst:g} burst {r.rate:g}/s, resources {sc.config.resources.burst:g} burst "
            f"{sc.config.resources.rate:g}/s, latency {sc.config.latency * 1000:.0f} ms; "
            f"the buckets' bound {bound:.1f}s"
        )
        print(
            f"{'contender':<22}{'wall s':>8}{'x bound':>9}{'lost':>6}{'throttled':>11}{'calls':>7}"
        )
        for label in args.only or list(CONTENDERS):
            rows = []
            for k in range(args.repeat):
                with Sandbox(replace(sc.config, seed=k)) as box:
                    ids = box.launch(sc.instances)
                    rows.append(CONTENDERS[label](box, ids, sc.batch_size))
            wall = statistics.median(x.wall for x in rows)
            print(
                f"{label:<22}{wall:>8.2f}{wall / bound if bound else 0:>9.2f}"
                f"{statistics.median(x.lost for x in rows):>6.0f}"
                f"{statistics.median(x.throttled for x in rows):>11.0f}"
                f"{statistics.median(x.calls for x in rows):>7.0f}"
            )


if __name__ == "__main__":
    main()
