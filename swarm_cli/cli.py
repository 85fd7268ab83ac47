"""The ``swarm`` command line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from . import __version__
from .display import render_summary
from .ledger import (
    CutShort,
    Damaged,
    LedgerError,
    Record,
    check_ledger_path,
    describe_damage,
    fold,
    fold_files,
    read_records,
)
from .run import (
    EXIT_AUTH,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    EXIT_USAGE,
    RunOptions,
    execute,
)
from .sandbox import SandboxConfig
from .targets import Targets, TargetsError, read_ids
from .window import PROFILES, WindowProfile

app = typer.Typer(
    name="swarm",
    help="Bulk cloud mutations as fast as the API allows, without losing an intent.\n\n"
    "Start with [bold]swarm demo[/bold]: it runs against a local fake EC2, no AWS account needed.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
ledger_app = typer.Typer(help="Read ledgers: what failed, what is done.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


class WindowChoice(str, Enum):
    adaptive = "adaptive"
    seed = "seed"


class Output(str, Enum):
    text = "text"
    json = "json"


class ProgressChoice(str, Enum):
    auto = "auto"
    live = "live"
    plain = "plain"
    none = "none"


class Preset(str, Enum):
    quick = "quick"
    ec2 = "ec2"


def _consoles() -> tuple[Console, Console]:
    # Soft wrap: long IDs and paths stay whole in logs and when piped.
    return (
        Console(soft_wrap=True, highlight=False),
        Console(stderr=True, soft_wrap=True, highlight=False),
    )


def fail(err: Console, message: str, code: int) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"swarm {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Bulk cloud mutations as fast as the API allows."""


# Options shared by the commands that run a terminate.
BatchSize = Annotated[
    int,
    typer.Option(
        "--batch-size",
        min=1,
        max=1000,
        help="Instance IDs per TerminateInstances call (EC2 takes up to 1000).",
    ),
]
MaxWindow = Annotated[
    int, typer.Option("--max-window", min=1, max=1000, help="Most calls ever in flight at once.")
]
MinWindow = Annotated[
    int,
    typer.Option(
        "--min-window", min=1, max=1000, help="Fewest calls in flight allowed after throttles."
    ),
]
WindowOpt = Annotated[
    WindowChoice,
    typer.Option(
        "--window-profile",
        help="adaptive: the default, tuned; seed: the reference TCP profile, reproduced exactly.",
    ),
]
MaxAttempts = Annotated[
    int,
    typer.Option(
        "--max-attempts",
        min=1,
        max=100,
        help="Tries per instance on server errors and timeouts (throttles never count).",
    ),
]
OutputOpt = Annotated[
    Output,
    typer.Option(
        "--output", "-o", help="text: a summary for people; json: one summary object on stdout."
    ),
]
ProgressOpt = Annotated[
    ProgressChoice,
    typer.Option(
        "--progress",
        help="auto: a live view on a terminal, plain lines otherwise; none: quiet until the end.",
    ),
]
DrainTimeout = Annotated[
    float,
    typer.Option(
        "--drain-timeout",
        min=0,
        help="On SIGINT/SIGTERM/SIGHUP: seconds to wait for calls in flight before recording "
        "the rest pending and exiting (a second signal stops the wait).",
    ),
]
CallTimeout = Annotated[
    float | None,
    typer.Option(
        "--call-timeout",
        min=0.1,
        help="Seconds to wait for one call's answer [default: follows the endpoint's measured "
        "round trips, 2-30 s].",
        show_default=False,
    ),
]
MaxOutage = Annotated[
    float,
    typer.Option(
        "--max-outage",
        min=0,
        help="Seconds to keep probing an endpoint that gives no answer at all before "
        "recording the rest pending and exiting 1.",
    ),
]
MissingOk = Annotated[
    bool,
    typer.Option(
        "--missing-ok",
        help="Instances that do not exist count as done for the exit code (a retry loop "
        "can go green).",
    ),
]


def _load_targets(ids: str, err: Console) -> Targets:
    try:
        targets = read_ids(ids, sys.stdin if ids == "-" else None)
    except TargetsError as exc:
        fail(err, str(exc), EXIT_USAGE)
    if targets.bad:
        shown = targets.bad[:20]
        err.print(
            f"[bold red]error:[/] {len(targets.bad)} invalid line(s) in {ids}; nothing was sent:"
        )
        for bad in shown:
            err.print(f"  line {bad.line}: {bad.text!r}: {bad.reason}")
        if len(targets.bad) > len(shown):
            err.print(f"  … and {len(targets.bad) - len(shown)} more")
        raise typer.Exit(EXIT_USAGE)
    if targets.duplicates:
        dup = len(targets.duplicates)
        extra = sum(len(lines) - 1 for lines in targets.duplicates.values())
        example, lines = next(iter(targets.duplicates.items()))
        err.print(
            f"[yellow]warning:[/] {dup} ID(s) listed more than once; {extra} repeat(s) "
            f"dropped (e.g. {example} on lines {', '.join(map(str, lines))})"
        )
    return targets


def _window(choice: WindowChoice, min_window: int, max_window: int, err: Console) -> WindowProfile:
    try:
        return PROFILES[choice.value].bounded(min_window=min_window, max_window=max_window)
    except ValueError as exc:
        fail(err, str(exc), EXIT_USAGE)


def _finish(
    report: dict[str, Any], code: int, output: Output, out: Console, err: Console
) -> NoReturn:
    if output is Output.json:
        render_summary(report, err)
        out.file.write(json.dumps(report, indent=2, default=str) + "\n")
        out.file.flush()
    else:
        render_summary(report, out)
    raise typer.Exit(code)


@app.command()
def terminate(
    ids: Annotated[
        str,
        typer.Option(
            "--ids",
            help="File of instance IDs, one per line (# comments allowed); - reads stdin.",
            show_default=False,
        ),
    ],
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            envvar="AWS_REGION",
            help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's).",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", envvar="AWS_PROFILE", help="Named AWS profile for credentials."),
    ] = None,
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            "--endpoint-url",
            envvar="AWS_ENDPOINT_URL",
            help="EC2 endpoint to call instead of AWS's, e.g. a swarm sandbox.",
        ),
    ] = None,
    ledger: Annotated[
        str, typer.Option("--ledger", help="JSONL file every resolved instance is appended to.")
    ] = "swarm-ledger.jsonl",
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip IDs the ledger already records as terminated.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Ask EC2 whether each call would be allowed; terminate nothing."
        ),
    ] = False,
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox",
            help="Rehearse: load exactly these IDs into a local fake EC2 with EC2's default "
            "limits and run against it. Nothing leaves this machine.",
        ),
    ] = False,
    batch_size: BatchSize = 10,
    max_window: MaxWindow = 500,
    min_window: MinWindow = 1,
    window_profile: WindowOpt = WindowChoice.adaptive,
    max_attempts: MaxAttempts = 5,
    output: OutputOpt = Output.text,
    progress: ProgressOpt = ProgressChoice.auto,
    drain_timeout: DrainTimeout = 3.0,
    call_timeout: CallTimeout = None,
    max_outage: MaxOutage = 45.0,
    missing_ok: MissingOk = False,
) -> None:
    """Terminate EC2 instances, as fast as the account's rate limit allows.

    Calls in flight follow a congestion window: it starts at 1, doubles per round
    trip up to 16, then grows while answers come quickly and halves on throttles.
    Every instance lands in the ledger; IDs that failed can be retried with
    [bold]swarm terminate --ids <(swarm ledger failed LEDGER)[/bold].

    Before the first call, every instance is in the ledger as pending; SIGINT, SIGTERM
    and SIGHUP stop sending, wait --drain-timeout for calls in flight, and record the rest.

    Exit codes: 0 all done · 1 some failed or pending (see the ledger) · 2 bad usage or
    input · 3 not confirmed · 4 credentials or permission · 74 the ledger could not be
    written · 130 interrupted (Ctrl-C) · 128+N stopped by signal N (143 SIGTERM, 129 SIGHUP).
    """
    from .ec2 import redact_url

    out, err = _consoles()
    targets = _load_targets(ids, err)
    profile_ = _window(window_profile, min_window, max_window, err)
    writes_ledger = not (sandbox or dry_run)
    if writes_ledger:
        try:
            check_ledger_path(ledger, ids_path=ids)
        except LedgerError as exc:
            fail(err, str(exc), EXIT_USAGE)
    todo = targets.ids
    if resume and not os.path.exists(ledger):
        err.print(f"resume: no ledger at {ledger} yet; every ID is to go")
    elif resume:
        done = _succeeded(ledger, "terminate", err)
        todo = [i for i in todo if i not in done]
        err.print(
            f"resume: {len(targets.ids) - len(todo)} already terminated per {ledger}; "
            f"{len(todo)} to go"
        )
    options = RunOptions(
        region=region,
        endpoint=redact_url(endpoint_url),
        dry_run=dry_run,
        batch_size=batch_size,
        max_attempts=max_attempts,
        window=profile_,
        ledger=ledger if writes_ledger else None,
        progress=progress.value,
        title="dry run" if dry_run else "terminate",
        drain_timeout=drain_timeout,
        call_timeout=call_timeout,
        max_outage=max_outage,
        missing_ok=missing_ok,
    )
    if not todo:
        err.print("nothing to do: no instance IDs to terminate")
        if output is Output.json:
            report, _ = execute([], _nothing, replace(options, ledger=None, progress="none"), err)
            out.file.write(json.dumps(report, indent=2, default=str) + "\n")
        raise typer.Exit(0)
    if sandbox:
        from .rehearse import rehearse

        with _interruptible(err):
            report, code = rehearse(todo, options, err)
        _finish(report, code, output, out, err)

    from .ec2 import Terminate, make_client

    try:
        client = make_client(
            region, profile=profile, endpoint_url=endpoint_url, max_pool=max_window
        )
    except Exception as exc:
        _client_error(exc, err)
    region, endpoint = client.meta.region_name, redact_url(client.meta.endpoint_url) or ""
    if not dry_run and not yes:
        _confirm(len(todo), region, endpoint, profile, ids, err)
    options = replace(options, region=region, endpoint=endpoint)
    report, code = execute(todo, Terminate(client, dry_run=dry_run), options, err)
    _finish(report, code, output, out, err)


def _nothing(ids: Any) -> dict[str, Any]:
    return {}


def _succeeded(ledger: str, action: str, err: Console) -> set[str]:
    """IDs the ledger holds as done for ``action``: what a resume skips."""
    damaged: list[Damaged] = []
    try:
        state = fold(read_records(ledger, damaged))
    except LedgerError as exc:
        fail(err, str(exc), EXIT_USAGE)
    if damaged:
        err.print(f"[yellow]warning:[/] {describe_damage(damaged)}")
    return {r.id for (act, _), r in state.items() if act == action and r.status == "succeeded"}


def _confirm(
    count: int, region: str, where: str, profile: str | None, ids: str, err: Console
) -> None:
    what = f"terminate {count} instance(s) in {region} via {where}" + (
        f" with profile {profile}" if profile else ""
    )
    if ids == "-" or not sys.stdin.isatty():
        fail(
            err,
            f"refusing to {what} without confirmation: no terminal to ask on. "
            "Pass --yes to confirm (scripts and CI).",
            EXIT_REFUSED,
        )
    if not typer.confirm(f"About to {what}. Continue?", default=False, err=True):
        err.print("not confirmed; nothing was sent")
        raise typer.Exit(EXIT_REFUSED)


def _client_error(exc: Exception, err: Console) -> NoReturn:
    from botocore.exceptions import NoRegionError, ProfileNotFound

    if isinstance(exc, NoRegionError):
        fail(err, "no AWS region: pass --region or set AWS_REGION", EXIT_USAGE)
    if isinstance(exc, ProfileNotFound):
        fail(err, str(exc), EXIT_AUTH)
    from .ec2 import CREDENTIAL_ERRORS, classify_exception

    if isinstance(exc, CREDENTIAL_ERRORS):  # resolved when the client is made; nothing sent
        fail(err, f"no usable credentials: {classify_exception(exc).message}", EXIT_AUTH)
    fail(err, f"cannot set up the EC2 client: {exc}", EXIT_USAGE)


@ledger_app.command("failed")
def ledger_failed(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Ledger files; several are merged.", exists=True, dir_okay=False),
    ],
    action: Annotated[str, typer.Option("--action", help="Which action's intents.")] = "terminate",
    missing: Annotated[
        bool,
        typer.Option("--missing", help="Also list the IDs EC2 said do not exist."),
    ] = False,
) -> None:
    """Print the IDs worth retrying (failed or pending), one per line.

    Pending means not known to be done: never sent, or in flight when the run was
    stopped or killed. Feed them back:
    swarm terminate --ids <(swarm ledger failed swarm-ledger.jsonl)
    """
    wanted = {"failed", "pending"} | ({"missing"} if missing else set())
    state = _fold_ledgers(paths)
    typer.echo(
        "".join(
            f"{instance_id}\n"
            for (act, instance_id), record in state.items()
            if act == action and record.status in wanted
        ),
        nl=False,
    )


@ledger_app.command("summary")
def ledger_summary(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Ledger files; several are merged.", exists=True, dir_okay=False),
    ],
    output: OutputOpt = Output.text,
) -> None:
    """Count intents by their merged state, per action."""
    from .ledger import STATUSES

    state = _fold_ledgers(paths)
    counts: dict[str, dict[str, int]] = {}
    for (act, _), record in state.items():
        per = counts.setdefault(act, dict.fromkeys(STATUSES, 0))
        per[record.status] += 1
    if output is Output.json:
        typer.echo(json.dumps({"actions": counts}, indent=2))
        return
    for act, per in counts.items():
        typer.echo(f"{act}: " + " · ".join(f"{n} {s}" for s, n in per.items()))


def _fold_ledgers(paths: list[Path]) -> dict[tuple[str, str], Record]:
    """Merge ledgers; lines that do not parse (a crash mid-write) are skipped with a warning."""
    damaged: list[Damaged] = []
    cut_short: list[CutShort] = []
    try:
        state = fold_files((str(p) for p in paths), damaged, cut_short)
    except LedgerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if damaged:
        typer.echo(f"warning: {describe_damage(damaged)}", err=True)
    for run in cut_short:
        typer.echo(f"warning: {run.describe()}", err=True)
    return state


# Options shared by the commands that start a sandbox.
PresetOpt = Annotated[
    Preset,
    typer.Option(
        "--preset", help="quick: scaled for a snappy demo; ec2: EC2's documented default limits."
    ),
]
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate", min=0.1, help="Calls per second the request bucket refills [default: preset's]."
    ),
]
BurstOpt = Annotated[
    float | None,
    typer.Option("--burst", min=1, help="Calls the request bucket holds [default: preset's]."),
]
ResourceRateOpt = Annotated[
    float | None,
    typer.Option(
        "--resource-rate",
        min=0.1,
        help="Instances per second the resource bucket refills [default: preset's].",
    ),
]
ResourceBurstOpt = Annotated[
    float | None,
    typer.Option(
        "--resource-burst", min=1, help="Instances the resource bucket holds [default: preset's]."
    ),
]
LatencyOpt = Annotated[
    float | None,
    typer.Option("--latency", min=0, help="Seconds each mutating call takes [default: preset's]."),
]
ErrorRateOpt = Annotated[
    float,
    typer.Option(
        "--error-rate", min=0, max=1, help="Share of calls answered HTTP 500 InternalError."
    ),
]
ProtectedOpt = Annotated[
    int,
    typer.Option("--protected", min=0, help="Instances with termination protection (they fail)."),
]
MissingOpt = Annotated[
    int,
    typer.Option("--missing", min=0, help="IDs that do not exist, added to the list (they fail)."),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed for latency and faults.")]


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
) -> SandboxConfig:
    from .sandbox import PRESETS, BucketSpec

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
        seed=seed,
    )


@app.command()
def demo(
    count: Annotated[
        int, typer.Option("--count", min=1, max=5000, help="Instances to launch and terminate.")
    ] = 300,
    preset: PresetOpt = Preset.quick,
    rate: RateOpt = None,
    burst: BurstOpt = None,
    resource_rate: ResourceRateOpt = None,
    resource_burst: ResourceBurstOpt = None,
    latency: LatencyOpt = None,
    error_rate: ErrorRateOpt = 0.02,
    protected: ProtectedOpt = 0,
    missing: MissingOpt = 0,
    seed: SeedOpt = 0,
    batch_size: BatchSize = 1,
    max_window: MaxWindow = 64,
    min_window: MinWindow = 1,
    window_profile: WindowOpt = WindowChoice.adaptive,
    max_attempts: MaxAttempts = 5,
    ledger: Annotated[
        str | None,
        typer.Option("--ledger", help="Ledger file [default: a new file in the temp folder]."),
    ] = None,
    output: OutputOpt = Output.text,
    progress: ProgressOpt = ProgressChoice.auto,
) -> None:
    """Watch swarm work against a local fake EC2: no AWS account, nothing leaves this machine.

    Starts the sandbox (moto behind EC2-style token buckets), launches instances in it,
    and terminates them all through the same path as a real run. One ID per call by
    default, so the window has many calls to learn from.
    """
    from .rehearse import run_demo

    out, err = _consoles()
    config = _sandbox_config(
        preset,
        rate=rate,
        burst=burst,
        resource_rate=resource_rate,
        resource_burst=resource_burst,
        latency=latency,
        error_rate=error_rate,
        seed=seed,
    )
    ledger_path = ledger or os.path.join(
        tempfile.gettempdir(), f"swarm-demo-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    )
    options = RunOptions(
        batch_size=batch_size,
        max_attempts=max_attempts,
        window=_window(window_profile, min_window, max_window, err),
        ledger=ledger_path,
        progress=progress.value,
        title="demo",
    )
    with _interruptible(err):
        report, code = run_demo(config, count, options, err, protected=protected, missing=missing)
    _finish(report, code, output, out, err)


@app.command("sandbox")
def sandbox_cmd(
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0 picks a free one)."),
    ] = 8577,
    count: Annotated[
        int, typer.Option("--count", min=0, help="Running instances to launch at start.")
    ] = 0,
    ids_out: Annotated[
        Path | None,
        typer.Option(
            "--ids-out", help="Write the launched IDs (and --missing ones) here, one per line."
        ),
    ] = None,
    env_out: Annotated[
        Path | None,
        typer.Option(
            "--env-out", help="Write the environment to export here, once the sandbox is ready."
        ),
    ] = None,
    preset: PresetOpt = Preset.quick,
    rate: RateOpt = None,
    burst: BurstOpt = None,
    resource_rate: ResourceRateOpt = None,
    resource_burst: ResourceBurstOpt = None,
    latency: LatencyOpt = None,
    error_rate: ErrorRateOpt = 0.0,
    protected: ProtectedOpt = 0,
    missing: MissingOpt = 0,
    seed: SeedOpt = 0,
) -> None:
    """Keep a fake EC2 running on 127.0.0.1 until Ctrl-C, for trying commands or CI jobs.

    Prints the endpoint and the environment to export (dummy credentials, region,
    AWS_ENDPOINT_URL); with --env-out and --ids-out, a CI step can wait for the
    env file and then run swarm terminate against it.
    """
    import random

    from .sandbox import ACCOUNT, Sandbox, environment, fake_ids

    out, err = _consoles()
    config = _sandbox_config(
        preset,
        rate=rate,
        burst=burst,
        resource_rate=resource_rate,
        resource_burst=resource_burst,
        latency=latency,
        error_rate=error_rate,
        seed=seed,
    )
    box = Sandbox(config, port=port)
    try:
        box.start()
    except OSError as exc:
        fail(err, f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", EXIT_USAGE)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if count:
            err.print(f"launching {count} instances…")
        ids = box.launch(count, protected=min(protected, count))
        listed = ids + fake_ids(missing, random.Random(seed))
        if ids_out is not None:
            _write_atomic(ids_out, "".join(f"{i}\n" for i in listed))
        exports = "".join(f"export {k}={v}\n" for k, v in environment(box).items())
        if env_out is not None:
            _write_atomic(env_out, exports)
        r, res = config.requests, config.resources
        err.print(
            f"[bold]swarm sandbox[/]: fake EC2 on {box.endpoint} ({config.region}, "
            f"account {ACCOUNT}). Not AWS: nothing leaves this machine."
        )
        err.print(
            f"  limits: {r.burst:g} calls burst, {r.rate:g}/s; {res.burst:g} instances "
            f"burst, {res.rate:g}/s; latency {config.latency * 1000:.0f} ms; "
            f"errors {config.error_rate:.0%}"
        )
        err.print(
            f"  {len(ids)} running instance(s)"
            + (f", {min(protected, count)} protected" if protected else "")
            + (f"; IDs in {ids_out}" if ids_out else "")
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


@contextlib.contextmanager
def _interruptible(err: Console) -> Iterator[None]:
    """Ctrl-C while the sandbox is being set up: stop cleanly with 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main() -> None:
    app()
