"""``swarm demo`` and ``swarm sandbox``: the embedded fake EC2, to watch and to try things on."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..actions import ACTIONS
from ..errors import UsageError
from ..run import RunOptions
from ..text import literal
from .common import app, consoles, finish, interruptible, require_sandbox, write_atomic
from .exits import warn
from .options import (
    BatchSize,
    MaxAttempts,
    MaxWindow,
    MinWindow,
    Output,
    OutputOpt,
    Preset,
    ProgressChoice,
    ProgressOpt,
    WindowChoice,
    WindowOpt,
    batch_options,
    window_profile,
)

if TYPE_CHECKING:  # the fake EC2 is imported by the commands that start one
    from collections.abc import Mapping, Sequence

    from ..sandbox import SandboxConfig

PresetOpt = Annotated[
    Preset,
    typer.Option(
        "--preset", help="quick: scaled for a snappy demo; ec2: EC2's documented default limits."
    ),
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate",
        metavar="PER_S",
        min=0.1,
        help=(
            "Calls per second TerminateInstances' request bucket refills; every other "
            "action's scales with it as EC2 documents them [default: preset's]."
        ),
    ),
]
BurstOpt = Annotated[
    float | None,
    typer.Option(
        "--burst",
        metavar="N",
        min=1,
        help=(
            "Calls TerminateInstances' request bucket holds; other actions' scale with it "
            "[default: preset's]."
        ),
    ),
]
ResourceRateOpt = Annotated[
    float | None,
    typer.Option(
        "--resource-rate",
        metavar="PER_S",
        min=0.1,
        help=(
            "Instances per second TerminateInstances' resource bucket refills; other "
            "actions' scale with it [default: preset's]."
        ),
    ),
]
ResourceBurstOpt = Annotated[
    float | None,
    typer.Option(
        "--resource-burst",
        metavar="N",
        min=1,
        help=(
            "Instances TerminateInstances' resource bucket holds; other actions' scale with "
            "it [default: preset's]."
        ),
    ),
]
LatencyOpt = Annotated[
    float | None,
    typer.Option(
        "--latency",
        metavar="SECONDS",
        min=0,
        help="Seconds each mutating call takes [default: preset's].",
    ),
]
ErrorRateOpt = Annotated[
    float,
    typer.Option(
        "--error-rate",
        metavar="SHARE",
        min=0,
        max=1,
        help="Share of calls answered HTTP 500 InternalError.",
    ),
]
ThrottleShareOpt = Annotated[
    float,
    typer.Option(
        "--throttle-share",
        metavar="SHARE",
        min=0,
        max=1,
        help="Share of instance calls throttled at random, whatever the buckets hold (an API "
        "busy with other clients' calls).",
    ),
]
TransitionOpt = Annotated[
    float,
    typer.Option(
        "--transition-seconds",
        metavar="SECONDS",
        min=0,
        help="Seconds a stopped instance stays stopping, and a started one pending, as EC2's "
        "do for tens of seconds (default 0: at once). None starts while still stopping.",
    ),
]
ProtectedOpt = Annotated[
    int,
    typer.Option(
        "--protected",
        metavar="N",
        min=0,
        help="Of each account/region pair's instances, N with termination protection (they fail).",
    ),
]
MissingOpt = Annotated[
    int,
    typer.Option(
        "--missing",
        metavar="N",
        min=0,
        help="IDs that do not exist, added to the list in the first account/region pair "
        "(they end missing).",
    ),
]


def _kind_option(name: str, what: str) -> Any:
    return typer.Option(f"--{name}", metavar="N", min=0, help=f"{what} to make at start.")


SnapshotsOpt = Annotated[int, _kind_option("snapshots", "EBS snapshots (for swarm ec2)")]
VolumesOpt = Annotated[int, _kind_option("volumes", "EBS volumes")]
ImagesOpt = Annotated[int, _kind_option("images", "AMIs")]
AddressesOpt = Annotated[int, _kind_option("addresses", "Elastic IPs")]
InUseOpt = Annotated[
    int,
    typer.Option(
        "--in-use",
        metavar="N",
        min=0,
        help="Of the snapshots, volumes and addresses, this many of each in use (an AMI's "
        "snapshot, an attached volume, an associated address): EC2 refuses to delete them.",
    ),
]
ResourcesOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--resources-out",
        metavar="DIR",
        help="Write the IDs of each kind made (snapshots.txt, volumes.txt, images.txt, "
        "addresses.txt) into this folder, ready for swarm ec2 --ids.",
    ),
]
SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed",
        metavar="N",
        help="Random seed for latency and faults.",
    ),
]


def _sandbox_config(
    preset: Preset,
    *,
    rate: float | None,
    burst: float | None,
    resource_rate: float | None,
    resource_burst: float | None,
    latency: float | None,
    error_rate: float,
    seed: int,
    throttle_share: float = 0.0,
    transition_seconds: float = 0.0,
) -> SandboxConfig:
    from ..sandbox import PRESETS, BucketSpec

    base = PRESETS[preset.value]

    def bucket(spec: BucketSpec, burst_: float | None, rate_: float | None) -> BucketSpec:
        return BucketSpec(
            spec.burst if burst_ is None else burst_, spec.rate if rate_ is None else rate_
        )

    return base.with_(
        requests=bucket(base.requests, burst, rate),
        resources=bucket(base.resources, resource_burst, resource_rate),
        latency=latency,
        error_rate=error_rate,
        throttle_share=throttle_share,
        transition_seconds=transition_seconds,
        seed=seed,
    )


@app.command()
def demo(
    count: Annotated[
        int,
        typer.Option(
            "--count",
            metavar="N",
            min=1,
            max=5000,
            help="Instances to launch and terminate (per region).",
        ),
    ] = 300,
    regions: Annotated[
        int,
        typer.Option(
            "--regions",
            metavar="N",
            min=1,
            max=5,
            help="Regions to spread over: each has buckets and a window of its own, all at once.",
        ),
    ] = 1,
    preset: PresetOpt = Preset.quick,
    rate: RateOpt = None,
    burst: BurstOpt = None,
    resource_rate: ResourceRateOpt = None,
    resource_burst: ResourceBurstOpt = None,
    latency: LatencyOpt = None,
    error_rate: ErrorRateOpt = 0.02,
    throttle_share: ThrottleShareOpt = 0.0,
    protected: ProtectedOpt = 0,
    missing: MissingOpt = 0,
    seed: SeedOpt = 0,
    batch_size: BatchSize = "1",
    max_window: MaxWindow = 64,
    min_window: MinWindow = 1,
    window_profile_: WindowOpt = WindowChoice.adaptive,
    max_attempts: MaxAttempts = 5,
    ledger: Annotated[
        str | None,
        typer.Option(
            "--ledger", metavar="PATH", help="Ledger file [default: a new file in the temp folder]."
        ),
    ] = None,
    output: OutputOpt = Output.text,
    progress: ProgressOpt = ProgressChoice.auto,
    operation_name: Annotated[
        str,
        typer.Option(
            "--operation",
            metavar="OPERATION",
            help="What to run: terminate-instances, or a swarm ec2 deletion on resources the "
            "demo makes (delete-snapshot, delete-volume, deregister-image, release-address; "
            "--protected N of them in use, but for images: the sandbox cannot protect an "
            "image from deregistration).",
        ),
    ] = "terminate-instances",
) -> int:
    """Watch swarm work against a local fake EC2: no AWS account, nothing leaves this machine.

    Starts the sandbox (moto behind EC2-style token buckets), launches instances in it,
    and terminates them all through the same path as a real run (or, with --operation,
    makes snapshots, volumes, images or addresses and deletes them). One ID per call by
    default, so the window has many calls to learn from.
    """
    out, err = consoles()
    from ..actions.operations import RESOURCE_OPERATIONS
    from ..rehearse import DEMO_OPERATIONS, run_demo

    operation = RESOURCE_OPERATIONS.get(operation_name)
    if operation_name != "terminate-instances" and operation_name not in DEMO_OPERATIONS:
        raise UsageError(
            f"--operation {operation_name}: expected terminate-instances or "
            f"{', '.join(DEMO_OPERATIONS)}"
        )
    if protected and operation_name == "deregister-image":
        raise UsageError(
            "--protected with deregister-image: the sandbox cannot protect an image from "
            "deregistration (moto has no deregistration protection), so none can be in use"
        )
    require_sandbox()

    config = _sandbox_config(
        preset,
        rate=rate,
        burst=burst,
        resource_rate=resource_rate,
        resource_burst=resource_burst,
        latency=latency,
        error_rate=error_rate,
        seed=seed,
        throttle_share=throttle_share,
    )
    # Unique: two demos started in the same second must not share a ledger.
    ledger_path = ledger or os.path.join(
        tempfile.gettempdir(),
        f"swarm-demo-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}.jsonl",
    )
    spec = ACTIONS["terminate"] if operation is None else operation.spec
    size, auto_batch = batch_options(batch_size, spec.limits)
    options = RunOptions(
        batch_size=size,
        auto_batch=auto_batch,
        max_attempts=max_attempts,
        window=window_profile(window_profile_, min_window, max_window),
        ledger=ledger_path,
        progress=progress.value,
    )
    with interruptible():
        report = run_demo(
            config,
            count,
            options,
            err,
            protected=protected,
            missing=missing,
            regions=regions,
            operation=operation,
        )
    return finish(report, output, out, err)


@app.command("sandbox")
def sandbox_cmd(
    port: Annotated[
        int,
        typer.Option(
            "--port",
            metavar="PORT",
            min=0,
            max=65535,
            help="Port on 127.0.0.1 (0 picks a free one).",
        ),
    ] = 8577,
    count: Annotated[
        int,
        typer.Option("--count", metavar="N", min=0, help="Running instances to launch at start."),
    ] = 0,
    ids_out: Annotated[
        Path | None,
        typer.Option(
            "--ids-out",
            metavar="FILE",
            help="Write the launched IDs (and --missing ones) here: one per line, or with "
            "several account/region pairs a CSV with region and account.",
        ),
    ] = None,
    env_out: Annotated[
        Path | None,
        typer.Option(
            "--env-out",
            metavar="FILE",
            help="Write the environment to export here once the sandbox is ready (a file "
            "left from before is removed at start); removed again when it stops.",
        ),
    ] = None,
    regions: Annotated[
        int,
        typer.Option(
            "--regions",
            metavar="N",
            min=1,
            max=5,
            help="Launch --count instances in each of this many regions.",
        ),
    ] = 1,
    accounts: Annotated[
        int,
        typer.Option(
            "--accounts",
            metavar="N",
            min=0,
            max=9,
            help="Launch them in N accounts (111111111111, 222222222222, …) instead of the "
            "sandbox's own, each reached through a role (swarm --accounts FILE; see "
            "--accounts-out); --ids-out is then a CSV with region and account.",
        ),
    ] = 0,
    accounts_out: Annotated[
        Path | None,
        typer.Option(
            "--accounts-out",
            metavar="FILE",
            help="Write an accounts file (YAML) for those accounts.",
        ),
    ] = None,
    preset: PresetOpt = Preset.quick,
    rate: RateOpt = None,
    burst: BurstOpt = None,
    resource_rate: ResourceRateOpt = None,
    resource_burst: ResourceBurstOpt = None,
    latency: LatencyOpt = None,
    error_rate: ErrorRateOpt = 0.0,
    throttle_share: ThrottleShareOpt = 0.0,
    transition_seconds: TransitionOpt = 0.0,
    protected: ProtectedOpt = 0,
    missing: MissingOpt = 0,
    seed: SeedOpt = 0,
    snapshots: SnapshotsOpt = 0,
    volumes: VolumesOpt = 0,
    images: ImagesOpt = 0,
    addresses: AddressesOpt = 0,
    in_use: InUseOpt = 0,
    resources_out: ResourcesOutOpt = None,
) -> None:
    """Keep a fake EC2 running on 127.0.0.1 until Ctrl-C, for trying commands or CI jobs.

    Prints the endpoint and the environment to export (dummy credentials, region,
    AWS_ENDPOINT_URL); with --env-out and --ids-out, a CI step can wait for the
    env file and then run swarm terminate against it.
    """
    import gc
    import random

    # cli.main holds garbage collection off for a quick first call; a server that runs
    # until Ctrl-C needs it back, or moto's cycles would pile up for as long as it serves.
    gc.enable()
    out, err = consoles()
    require_sandbox()
    from ..sandbox import ACCOUNT, Sandbox, environment, fake_ids

    config = _sandbox_config(
        preset,
        rate=rate,
        burst=burst,
        resource_rate=resource_rate,
        resource_burst=resource_burst,
        latency=latency,
        error_rate=error_rate,
        seed=seed,
        throttle_share=throttle_share,
        transition_seconds=transition_seconds,
    )
    if accounts_out is not None and not accounts:
        raise UsageError(
            "--accounts-out writes the accounts that --accounts N adds (each reached "
            "through a role); without them there is none to write"
        )
    if env_out is not None:
        # A file left by an earlier sandbox would tell a waiting step it is ready now.
        try:
            env_out.unlink(missing_ok=True)
        except OSError as exc:
            raise UsageError(f"--env-out {literal(env_out)}: {exc.strerror or exc}") from exc
    box = Sandbox(config, port=port)
    try:
        box.start()
    except OSError as exc:
        hint = "; --port 0 picks a free port" if port else ""
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}{hint}") from exc
    # SIGINT too: a shell starts background jobs with it ignored, and then Ctrl-C's
    # "kill -INT" would do nothing.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        places = sandbox_places(config.region, regions, accounts)
        if not count and (ids_out or regions > 1 or accounts):
            warn(err, "--count is 0: no instances are launched")
        if count:
            err.print(
                f"launching {count} instances in each of {len(places)} account/region pair(s)…"
            )
        rows: list[tuple[str, str, str | None]] = []
        ids: list[str] = []
        # Made in moto's backend directly (RunInstances through moto takes minutes at tens
        # of thousands). Their IDs are new each time, as moto's are: a ledger left from an
        # earlier sandbox must never find its IDs here, and a resume take them for done.
        for account, region in places:
            launched = fake_ids(count)
            box.load_ids(launched, region=region, account=account)
            box.protect(launched[:protected], region=region, account=account)
            ids += launched
            rows += [(i, region, account) for i in launched]
        # In the first pair, so that every line of a CSV names a place the list can act in.
        first_account, first_region = places[0]
        gone = fake_ids(missing, random.Random(seed))
        rows += [(i, first_region, first_account) for i in gone]
        if ids_out is not None:
            if len(places) == 1:
                write_atomic(ids_out, "".join(f"{i}\n" for i, _, _ in rows))
            else:
                table = "".join(f"{i},{r},{a or ''}\n" for i, r, a in rows)
                write_atomic(ids_out, "instance_id,region,account\n" + table)
        if accounts_out is not None:
            write_atomic(accounts_out, accounts_yaml(places))
        made = box.seed(
            snapshots=snapshots,
            volumes=volumes,
            images=images,
            addresses=addresses,
            in_use=in_use,
        )
        if resources_out is not None:
            resources_out.mkdir(parents=True, exist_ok=True)
            for kind in ("snapshots", "volumes", "images", "addresses"):
                write_atomic(resources_out / f"{kind}.txt", "".join(f"{i}\n" for i in made[kind]))
        seeded = ", ".join(f"{len(made[k])} {k}" for k in made if made[k] and k != "in-use-images")
        if seeded:
            err.print(
                f"  made {seeded}"
                + (f"; {_in_use(in_use, made)}" if in_use else "")
                + (f"; IDs in {literal(resources_out)}" if resources_out else ""),
                markup=False,
            )
        exports = "".join(f"export {k}={v}\n" for k, v in environment(box).items())
        if env_out is not None:
            write_atomic(env_out, exports)
        r, res = config.requests, config.resources
        err.print(
            f"[bold]swarm sandbox[/]: fake EC2 on {box.endpoint} ({config.region}, "
            f"account {ACCOUNT}). Not AWS: nothing leaves this machine."
        )
        err.print(
            f"  limits of TerminateInstances: {r.burst:g} calls burst, {r.rate:g}/s; "
            f"{res.burst:g} instances "
            f"burst, {res.rate:g}/s; latency {config.latency * 1000:.0f} ms; "
            f"errors {config.error_rate:.0%}"
            + (
                f"; {config.throttle_share:.0%} throttled at random"
                if config.throttle_share
                else ""
            )
            + (
                f"; stopping and pending for {config.transition_seconds:g} s"
                if config.transition_seconds
                else ""
            )
        )
        err.print(f"  {other_limits(config)}", markup=False)
        err.print(
            f"  {len(ids)} running instance(s)"
            + (f", {min(protected, count) * len(places)} protected" if protected else "")
            + (f"; IDs in {literal(ids_out)}" if ids_out else ""),
            markup=False,
        )
        out.file.write(exports)
        out.file.flush()
        err.print("Ctrl-C to stop.")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        err.print("sandbox stopped")
    finally:
        box.stop()
        if env_out is not None:
            with contextlib.suppress(OSError):
                env_out.unlink(missing_ok=True)  # its endpoint is gone


def other_limits(config: SandboxConfig) -> str:
    """The buckets of every action but TerminateInstances, scaled from its own as EC2's
    documented limits are: APIs of the same buckets on one line's part."""
    groups: dict[str, list[str]] = {}
    for api, (calls, instances) in config.action_limits().items():
        if api == "TerminateInstances":
            continue
        text = f"{calls.burst:g} call{'' if calls.burst == 1 else 's'} burst, {calls.rate:g}/s" + (
            f", {instances.burst:g} instances burst, {instances.rate:g}/s" if instances else ""
        )
        groups.setdefault(text, []).append(api)
    parts = [f"{', '.join(sorted(apis))}: {text}" for text, apis in groups.items()]
    return "other actions, scaled as EC2 documents them: " + "; ".join(parts)


def sandbox_places(region: str, regions: int, accounts: int) -> list[tuple[str | None, str]]:
    """(account, region) pairs of a sandbox: its own account, or N others instead (an ID
    list of several accounts names an account on every line)."""
    from ..rehearse import DEMO_REGIONS

    names = (region, *(n for n in DEMO_REGIONS if n != region))[:regions]
    owners: list[str | None] = [None] if not accounts else []
    owners += [str(k) * 12 for k in range(1, accounts + 1)]
    return [(a, r) for a in owners for r in names]


def accounts_yaml(places: list[tuple[str | None, str]]) -> str:
    from ..sandbox import ROLE_NAME

    lines = [
        "# The sandbox's accounts, each reached through a role (moto accepts any).",
        "accounts:",
    ]
    for account in dict.fromkeys(a for a, _ in places if a):
        regions = ", ".join(r for a, r in places if a == account)
        lines += [
            f'  - account_id: "{account}"',
            f"    role: arn:aws:iam::{account}:role/{ROLE_NAME}",
            f"    regions: [{regions}]",
        ]
    return "\n".join(lines) + "\n"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _in_use(count: int, made: Mapping[str, Sequence[str]]) -> str:
    """What ``--in-use`` put to use among what was made (no more of a kind than were
    made): no image can be, as the fake EC2 has no deregistration protection."""
    parts = [
        f"{min(count, len(made[k]))} of the {k}"
        for k in ("snapshots", "volumes", "addresses")
        if made.get(k)
    ]
    if not parts:
        return "none of them in use (--in-use takes snapshots, volumes and addresses)"
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts) + " in use"
