"""Runs against the embedded fake EC2: the demo and the rehearsal of a real ID list."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from typing import Any

from rich.console import Console

from .actions import ACTIONS
from .actions.operations import RESOURCE_OPERATIONS, Operation
from .ec2 import BatchCall, InstanceCall, classify_exception, make_client, unknown_regions
from .errors import UsageError
from .report import Pair, Report
from .run import Job, RunOptions
from .sandbox import CREDENTIALS, PRESETS, Sandbox, SandboxConfig, fake_ids
from .text import plural
from .views import run_job

# The operations swarm demo runs on resources it makes (of a kind Sandbox.seed makes).
DEMO_OPERATIONS = ("delete-snapshot", "delete-volume", "deregister-image", "release-address")


def run_in_sandbox(
    box: Sandbox, job: Job, console: Console, params: Mapping[str, Any] | None = None
) -> Report:
    """Run a job against the sandbox, then say what the sandbox saw; ``params`` go with
    every call (``Tags`` for create-tags)."""

    operation = RESOURCE_OPERATIONS.get(job.action.name)

    def action(pair: Pair) -> BatchCall:
        client = make_client(
            pair.region,
            endpoint_url=box.endpoint,
            max_pool=job.options.window.max_window,
            credentials=box.credentials(pair.account) if pair.account else CREDENTIALS,
            profileless=True,
        )
        if operation is not None:
            from .operation_call import OperationCall

            return OperationCall(client, operation, params=params)
        return InstanceCall(client, job.action, dry_run=job.options.dry_run, params=params)

    c = box.config
    rate = c.requests.rate * job.options.batch_size
    job = replace(
        job,
        options=replace(
            job.options,
            endpoint=box.endpoint,
            badges=("SANDBOX",),
            bound_rate=min(rate, c.resources.rate) if job.action.name == "terminate" else None,
        ),
    )
    report = run_job(job, action, console, classify=classify_exception)
    if operation is not None:
        report.extra["sandbox"] = {
            **asdict(box.counters),
            "config": asdict(box.config),
            operation.verb: len(box.done_by(operation.api)),
        }
        return report
    states = {
        i: state
        for pair, ids in job.groups.items()
        for i, state in box.held_states(ids, region=pair.region, account=pair.account).items()
    }
    report.extra["sandbox"] = {
        **asdict(box.counters),
        "config": asdict(box.config),
        "terminated": sum(1 for s in states.values() if s == "terminated"),
        "still_running": sum(1 for s in states.values() if s == "running"),
    }
    return report


def bound_seconds(
    config: SandboxConfig, ids: int, batch_size: int, api: str = "TerminateInstances"
) -> float:
    """The fastest ``api``'s buckets allow ``ids`` IDs in calls of ``batch_size``: what any
    client, however clever, must wait."""
    calls_bucket, ids_bucket = config.action_limits()[api]
    calls = -(-ids // batch_size)
    by_calls = max(0.0, calls - calls_bucket.burst) / calls_bucket.rate
    if ids_bucket is None:  # calls that spend no per-ID tokens
        return by_calls
    return max(by_calls, max(0.0, ids - ids_bucket.burst) / ids_bucket.rate)


# How often a load long enough to notice says how far it has got.
LOAD_REPORT_EVERY = 2.0


class LoadReporter:
    """Prints how far loading the IDs has got, at most every ``every`` seconds.

    ``load_ids`` reports per (account, region) pair; this counts over all pairs,
    so the lines read as one load of the whole list.
    """

    def __init__(
        self,
        console: Console,
        total: int,
        *,
        every: float = LOAD_REPORT_EVERY,
        clock: Callable[[], float] = time.monotonic,
        noun: str = "running instances",
    ) -> None:
        self.console = console
        self.total = total
        self.noun = noun
        self.every = every
        self.clock = clock
        self.started = clock()
        self._last = self.started
        self._before = 0  # IDs loaded into the pairs already done

    def pair(self) -> Callable[[int, int], None]:
        """A ``progress`` callback for loading the next pair."""
        before = self._before

        def report(done: int, total: int) -> None:
            self._before = before + done
            now = self.clock()
            if done and now - self._last >= self.every:
                self._last = now
                self.console.print(
                    f"loading {self.total:,} IDs into the fake EC2: {self._before:,} done"
                )

        return report

    def finish(self) -> None:
        self.console.print(
            f"loaded {self._before:,} IDs as {self.noun} in "
            f"{self.clock() - self.started:.1f}s; the rehearsal starts"
        )


def rehearse(
    job: Job,
    console: Console,
    *,
    expect_account: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> Report:
    """Load exactly the job's IDs into a fake EC2 with EC2's default limits and run it.

    A rehearsal acts on nothing real, so it writes no ledger (the report's
    ``ledger`` is None) and says so first. With ``expect_account`` (--expect-account),
    the IDs that name no account are rehearsed in that account, and the rail is
    checked with the sandbox's own STS: nothing, STS included, leaves the machine.
    Raises ``rails.RailError`` when the rail refuses.
    """
    if expect_account is not None:
        groups: dict[Pair, list[str]] = {}
        for pair, group in job.groups.items():
            into = Pair(pair.account or expect_account, pair.region)
            groups.setdefault(into, []).extend(group)
        job = replace(job, groups=groups)
    strangers = unknown_regions(pair.region for pair in job.groups)
    if strangers:
        raise UsageError(
            f"--sandbox: the fake EC2 has botocore's regions, not {', '.join(strangers)}; "
            "nothing was sent"
        )
    ids = [i for group in job.groups.values() for i in group]
    config = PRESETS["ec2"]
    # auto: at the most IDs a call may carry, which auto may grow to (a lower bound).
    per_call = job.action.limits.per_call
    batch = per_call if job.options.auto_batch else min(job.options.batch_size, per_call)
    # The action's own buckets (a reboot spends no instance tokens; a start's are stingy).
    buckets = config.action_limits()
    api = job.action.api if job.action.api in buckets else "TerminateInstances"
    bound = max(bound_seconds(config, len(group), batch, api) for group in job.groups.values())
    operation = RESOURCE_OPERATIONS.get(job.action.name)
    console.print("rehearsal: no ledger is written")
    calls, per_id = buckets[api]
    limits = f"{api}: {calls.burst:g} calls burst, {calls.rate:g}/s" + (
        f"; {per_id.burst:g} instances burst, {per_id.rate:g}/s" if per_id is not None else ""
    )
    if operation is None:
        loaded = "running instances"
    else:
        loaded = f"{plural(operation.resource)} (none in use)"
    console.print(
        f"[bold]rehearsal[/]: {len(ids):,} IDs are loaded as {loaded} into a local fake "
        f"EC2 with EC2's default limits ({limits}, per account and region). Nothing leaves "
        f"this machine. "
        + (
            f"The limits alone need at least {bound:.1f}s."
            if bound > 0
            else "It fits in the limits' bursts: round trips alone set the time."
        )
    )
    with Sandbox(config) as box:
        if expect_account is not None:
            check_in_sandbox(box, expect_account, console)
        loading = LoadReporter(console, len(ids), noun=loaded)
        load = box.load_ids if operation is None else box.load_resources
        try:
            for pair, group in job.groups.items():
                load(list(group), region=pair.region, account=pair.account, progress=loading.pair())
        except ValueError as exc:  # an ID of a kind the sandbox cannot make
            raise UsageError(f"--sandbox: {exc}; nothing was sent") from exc
        loading.finish()
        report = run_in_sandbox(
            box, replace(job, options=replace(job.options, ledger=None)), console, params
        )
    report.extra["rehearsal"] = {"bound_seconds": round(bound, 2)}
    if report.counts["pending"]:
        # A run cut short says nothing of how long the whole list would take.
        console.print(
            f"rehearsal: stopped after {report.elapsed_seconds:.1f}s with "
            f"{report.counts['pending']:,} IDs not done; at EC2's default limits the whole "
            f"list needs at least {bound:.1f}s"
        )
    else:
        console.print(
            f"rehearsal: at EC2's default limits the real run would take about "
            f"{report.elapsed_seconds:.1f}s "
            + (f"(bound {bound:.1f}s)" if bound > 0 else "(within the limits' bursts)")
        )
    return report


def check_in_sandbox(box: Sandbox, expected: str, console: Console) -> None:
    """--expect-account in a rehearsal: GetCallerIdentity on the sandbox's STS."""
    from .ec2 import profileless_session
    from .rails import check_account
    from .targets import ACCOUNT_ID

    credentials = box.credentials(expected) if ACCOUNT_ID.fullmatch(expected) else CREDENTIALS
    session = profileless_session(**credentials)
    got = check_account(session, expected, endpoint_url=box.endpoint, region=box.config.region)
    console.print(f"account {got}: as expected (the sandbox's STS)", markup=False)


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
    operation: Operation | None = None,
) -> Report:
    """Start the fake EC2, launch ``count`` instances in each region, and terminate them all
    (or make ``count`` resources of ``operation``'s kind, ``protected`` of them in use, and
    run it on them)."""
    r = config.requests
    where = config.region if regions == 1 else f"{regions} regions, each with buckets of its own"
    console.print(
        f"[bold]swarm demo[/]: a local fake EC2 (moto behind EC2-style token buckets: "
        f"{r.burst:g} calls burst, refilling {r.rate:g}/s; latency {config.latency * 1000:.0f} ms; "
        f"{config.error_rate:.0%} server errors; "
        + (f"{config.throttle_share:.0%} throttled at random; " if config.throttle_share else "")
        + f"{where}). No AWS account is used; nothing "
        "leaves this machine."
    )
    names = (config.region, *(n for n in DEMO_REGIONS if n != config.region))[:regions]
    with Sandbox(config) as box:
        noun = "instances" if operation is None else plural(operation.resource)
        console.print(f"making {count} {noun} in each of {len(names)} region(s)…")
        groups: dict[Pair, list[str]] = {}
        for region in names:
            if operation is None:
                ids = box.launch(count, protected=min(protected, count), region=region)
            else:
                kind = plural(operation.resource)  # as Sandbox.seed names them
                ids = box.seed(
                    snapshots=count if kind == "snapshots" else 0,
                    volumes=count if kind == "volumes" else 0,
                    images=count if kind == "images" else 0,
                    addresses=count if kind == "addresses" else 0,
                    in_use=protected,
                    region=region,
                )[kind]
            if region == names[0]:  # an ID names one resource: in one region only
                prefix = operation.prefix if operation is not None else None
                ids += fake_ids(missing, random.Random(config.seed), prefix or "i")
            groups[Pair(None, region)] = ids
        spec = ACTIONS["terminate"] if operation is None else operation.spec
        job = Job(spec, groups, options, "demo")
        report = run_in_sandbox(box, job, console)
    bound = bound_seconds(
        config, count + missing, min(options.batch_size, job.action.limits.per_call), spec.api
    )
    report.extra["demo"] = {
        "instances" if operation is None else plural(operation.resource): count * len(names),
        "regions": list(names),
        "bound_seconds": round(bound, 2),
    }
    console.print(
        f"demo: the buckets alone allow it in {bound:.1f}s at best; "
        f"swarm took {report.elapsed_seconds:.1f}s"
    )
    return report
