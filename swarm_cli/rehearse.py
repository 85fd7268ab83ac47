"""Runs against the embedded fake EC2: the demo and the rehearsal of a real ID list."""

from __future__ import annotations

import random
from dataclasses import asdict, replace

from rich.console import Console

from .actions import ACTIONS
from .ec2 import InstanceCall, classify_exception, make_client
from .report import Pair, Report
from .run import Job, RunOptions, run_job
from .sandbox import CREDENTIALS, PRESETS, Sandbox, SandboxConfig, fake_ids


def run_in_sandbox(box: Sandbox, job: Job, console: Console) -> Report:
    """Run a job against the sandbox, then say what the sandbox saw."""

    def action(pair: Pair) -> InstanceCall:
        client = make_client(
            pair.region,
            endpoint_url=box.endpoint,
            max_pool=job.options.window.max_window,
            credentials=box.credentials(pair.account) if pair.account else CREDENTIALS,
        )
        return InstanceCall(client, job.action, dry_run=job.options.dry_run)

    job = replace(job, options=replace(job.options, endpoint=box.endpoint))
    report = run_job(job, action, console, classify=classify_exception)
    states = {
        i: state
        for pair, ids in job.groups.items()
        for i, state in box.states(ids, region=pair.region, account=pair.account).items()
    }
    report.extra["sandbox"] = {
        **asdict(box.counters),
        "config": asdict(box.config),
        "terminated": sum(1 for s in states.values() if s == "terminated"),
        "still_running": sum(1 for s in states.values() if s == "running"),
    }
    return report


def bound_seconds(config: SandboxConfig, instances: int, batch_size: int) -> float:
    """The fastest the buckets allow: what any client, however clever, must wait."""
    calls = -(-instances // batch_size)
    by_requests = max(0.0, calls - config.requests.burst) / config.requests.rate
    by_resources = max(0.0, instances - config.resources.burst) / config.resources.rate
    return max(by_requests, by_resources)


def rehearse(job: Job, console: Console) -> Report:
    """Load exactly the job's IDs into a fake EC2 with EC2's default limits and run it."""
    ids = [i for group in job.groups.values() for i in group]
    config = PRESETS["ec2"]
    bound = max(
        bound_seconds(config, len(group), job.options.batch_size) for group in job.groups.values()
    )
    console.print(
        f"[bold]rehearsal[/]: {len(ids)} IDs loaded as running instances into a local fake EC2 "
        f"with EC2's default limits ({config.requests.burst:g} calls burst, "
        f"{config.requests.rate:g}/s; {config.resources.burst:g} instances burst, "
        f"{config.resources.rate:g}/s, per account and region). Nothing leaves this machine. "
        f"The limits alone need at least {bound:.1f}s."
    )
    with Sandbox(config) as box:
        for pair, group in job.groups.items():
            box.load_ids(list(group), region=pair.region, account=pair.account)
        report = run_in_sandbox(box, job, console)
    report.extra["rehearsal"] = {"bound_seconds": round(bound, 2)}
    console.print(
        f"rehearsal: at EC2's default limits the real run would take about "
        f"{report.elapsed_seconds:.1f}s (bound {bound:.1f}s)"
    )
    return report


DEMO_REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2", "us-west-2", "sa-east-1")


def run_demo(
    config: SandboxConfig,
    count: int,
    options: RunOptions,
    console: Console,
    *,
    protected: int = 0,
    missing: int = 0,
    regions: int = 1,
) -> Report:
    """Start the fake EC2, launch ``count`` instances in each region, and terminate them all."""
    r = config.requests
    where = config.region if regions == 1 else f"{regions} regions, each with buckets of its own"
    console.print(
        f"[bold]swarm demo[/]: a local fake EC2 (moto behind EC2-style token buckets: "
        f"{r.burst:g} calls burst, refilling {r.rate:g}/s; latency {config.latency * 1000:.0f} ms; "
        f"{config.error_rate:.0%} server errors; {where}). No AWS account is used; nothing "
        "leaves this machine."
    )
    names = (config.region, *(n for n in DEMO_REGIONS if n != config.region))[:regions]
    with Sandbox(config) as box:
        console.print(f"launching {count} instances in each of {len(names)} region(s)…")
        groups: dict[Pair, list[str]] = {}
        for region in names:
            ids = box.launch(count, protected=min(protected, count), region=region)
            groups[Pair(None, region)] = ids + fake_ids(missing, random.Random(config.seed))
        job = Job(ACTIONS["terminate"], groups, options, "demo")
        report = run_in_sandbox(box, job, console)
    bound = bound_seconds(config, count + missing, options.batch_size)
    report.extra["demo"] = {
        "instances": count * len(names),
        "regions": list(names),
        "bound_seconds": round(bound, 2),
    }
    console.print(
        f"demo: the buckets alone allow it in {bound:.1f}s at best; "
        f"swarm took {report.elapsed_seconds:.1f}s"
    )
    return report
