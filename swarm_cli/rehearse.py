"""Runs against the embedded fake EC2: the demo and the rehearsal of a real ID list."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from rich.console import Console

from .ec2 import Terminate, make_client
from .run import RunOptions, execute
from .sandbox import CREDENTIALS, PRESETS, Sandbox, SandboxConfig, fake_ids


def _run(
    box: Sandbox, ids: Sequence[str], options: RunOptions, console: Console
) -> tuple[dict[str, Any], int]:
    client = make_client(
        box.config.region,
        endpoint_url=box.endpoint,
        max_pool=options.window.max_window,
        credentials=CREDENTIALS,
    )
    options = replace(options, region=box.config.region, endpoint=box.endpoint)
    report, code = execute(ids, Terminate(client, dry_run=options.dry_run), options, console)
    states = box.states(ids)
    report["sandbox"] = {
        **asdict(box.counters),
        "config": asdict(box.config),
        "terminated": sum(1 for s in states.values() if s == "terminated"),
        "still_running": sum(1 for s in states.values() if s == "running"),
    }
    return report, code


def bound_seconds(config: SandboxConfig, instances: int, batch_size: int) -> float:
    """The fastest the buckets allow: what any client, however clever, must wait."""
    calls = -(-instances // batch_size)
    by_requests = max(0.0, calls - config.requests.burst) / config.requests.rate
    by_resources = max(0.0, instances - config.resources.burst) / config.resources.rate
    return max(by_requests, by_resources)


def rehearse(
    ids: Sequence[str], options: RunOptions, console: Console
) -> tuple[dict[str, Any], int]:
    """Load exactly ``ids`` into a fake EC2 with EC2's default limits and run against it."""
    config = replace(PRESETS["ec2"], region=options.region or "us-east-1")
    bound = bound_seconds(config, len(ids), options.batch_size)
    console.print(
        f"[bold]rehearsal[/]: {len(ids)} IDs loaded as running instances into a local fake EC2 "
        f"with EC2's default limits ({config.requests.burst:g} calls burst, "
        f"{config.requests.rate:g}/s; {config.resources.burst:g} instances burst, "
        f"{config.resources.rate:g}/s). Nothing leaves this machine. "
        f"The limits alone need at least {bound:.1f}s."
    )
    with Sandbox(config) as box:
        box.load_ids(list(ids))
        report, code = _run(box, ids, options, console)
    report["rehearsal"] = {"bound_seconds": round(bound, 2)}
    console.print(
        f"rehearsal: at EC2's default limits the real run would take about "
        f"{report['elapsed_seconds']:.1f}s (bound {bound:.1f}s)"
    )
    return report, code


def run_demo(
    config: SandboxConfig,
    count: int,
    options: RunOptions,
    console: Console,
    *,
    protected: int = 0,
    missing: int = 0,
) -> tuple[dict[str, Any], int]:
    """Start the fake EC2, launch ``count`` instances, and terminate them all."""
    r = config.requests
    console.print(
        f"[bold]swarm demo[/]: a local fake EC2 (moto behind EC2-style token buckets: "
        f"{r.burst:g} calls burst, refilling {r.rate:g}/s; latency {config.latency * 1000:.0f} ms; "
        f"{config.error_rate:.0%} server errors). No AWS account is used; nothing leaves this "
        "machine."
    )
    with Sandbox(config) as box:
        console.print(f"launching {count} instances…")
        ids = box.launch(count, protected=min(protected, count))
        ids += fake_ids(missing, random.Random(config.seed))
        report, code = _run(box, ids, options, console)
    bound = bound_seconds(config, len(ids), options.batch_size)
    report["demo"] = {"instances": count, "bound_seconds": round(bound, 2)}
    console.print(
        f"demo: the buckets alone allow it in {bound:.1f}s at best; "
        f"swarm took {report['elapsed_seconds']:.1f}s"
    )
    return report, code
