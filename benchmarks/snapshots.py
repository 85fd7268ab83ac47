"""Snapshot deletions (DeleteSnapshot: one ID per call) against EC2's default bucket for
mutating actions (50 calls burst, 5 per second), its rate scaled up so that 10,000 take
minutes, not half an hour: how close a run comes to the bucket's bound.

Prints a table: per round, the run's time from its first call, the bound (what the
bucket allows any client), their ratio, and the calls and throttles the sandbox saw.
"""

from __future__ import annotations

import argparse
import io
import time

from rich.console import Console

from swarm_cli.actions.operations import OPERATIONS
from swarm_cli.ec2 import classify_exception, make_client
from swarm_cli.operation_call import OperationCall
from swarm_cli.report import Pair
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import CREDENTIALS, BucketSpec, Sandbox, SandboxConfig
from swarm_cli.views import run_job
from swarm_cli.window import ADAPTIVE

OP = OPERATIONS["delete-snapshot"]


def run(count: int, scale: float) -> tuple[float, float, int, int]:
    """(seconds from the first call, the bound, calls admitted, throttles)."""
    # TerminateInstances' documented buckets, the rate scaled: every action follows.
    config = SandboxConfig(
        BucketSpec(100, 5 * scale), BucketSpec(1000, 20 * scale), latency=0.02, jitter=0.005
    )
    bucket, _ = config.action_limits()[OP.api]
    bound = max(0.0, count - bucket.burst) / bucket.rate
    options = RunOptions(batch_size=1, window=ADAPTIVE.bounded(max_window=64), progress="none")
    with Sandbox(config) as box:
        ids = box.seed(snapshots=count)["snapshots"]

        def action(pair: Pair) -> OperationCall:
            client = make_client(
                pair.region, endpoint_url=box.endpoint, max_pool=64, credentials=CREDENTIALS
            )
            return OperationCall(client, OP)

        job = Job(OP.spec, {Pair(None, config.region): ids}, options)
        report = run_job(job, action, Console(file=io.StringIO()), classify=classify_exception)
        ended = time.time()
        assert report.counts["succeeded"] == count, report.counts
        started = box.first_call_at or ended
        return ended - started, bound, box.calls_by(OP.api), box.throttles_by(OP.api)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000, help="snapshots to delete")
    parser.add_argument(
        "--scale", type=float, default=10.0, help="times EC2's refill rate (5/s) the bucket gets"
    )
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.count} DeleteSnapshot calls, bucket 50 burst, {5 * args.scale:g}/s")
    print(f"{'round':>5} {'run':>8} {'bound':>8} {'ratio':>6} {'calls':>7} {'throttles':>9}")
    for k in range(1, args.rounds + 1):
        took, bound, calls, throttles = run(args.count, args.scale)
        ratio = took / bound if bound else float("nan")
        print(f"{k:>5} {took:>7.1f}s {bound:>7.1f}s {ratio:>6.3f} {calls:>7} {throttles:>9}")


if __name__ == "__main__":
    main()
