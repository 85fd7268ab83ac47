"""What every command shares: the Typer app, the consoles, the options, and how a run ends."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .. import __version__
from ..actions.base import Limits
from ..batching import initial_size
from ..display import render_summary
from ..errors import Interrupted, UsageError
from ..report import Report
from ..window import PROFILES, Profile
from .exits import SwarmGroup, emit_json, exit_meaning

app = typer.Typer(
    name="swarm",
    cls=SwarmGroup,
    help="Bulk cloud mutations as fast as the API allows, without losing an intent.\n\n"
    "Start with swarm demo: it runs against a local fake EC2, no AWS account needed.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
ledger_app = typer.Typer(
    help="Read and merge ledgers: what failed, what is done.", no_args_is_help=True
)
app.add_typer(ledger_app, name="ledger")


class WindowChoice(str, Enum):
    adaptive = "adaptive"
    seed = "seed"
    reno = "reno"
    rate = "rate"


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


def consoles() -> tuple[Console, Console]:
    # Soft wrap: long IDs and paths stay whole in logs and when piped.
    return (
        Console(soft_wrap=True, highlight=False),
        Console(stderr=True, soft_wrap=True, highlight=False),
    )


def version_text() -> str:
    import platform

    import boto3
    import botocore

    return (
        f"swarm {__version__} (boto3 {boto3.__version__}, botocore {botocore.__version__}, "
        f"Python {platform.python_version()})"
    )


def _version(ctx: typer.Context, value: bool) -> None:
    if value:
        typer.echo(version_text())
        ctx.exit()  # click's way for an eager option: the command ends here, with 0


@app.command("version")
def version_cmd() -> None:
    """Print swarm's version and the boto3, botocore and Python it runs on."""
    typer.echo(version_text())


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


# Options shared by the commands that run an action.
def _batch_size(value: str) -> str:
    value = value.strip().lower()
    if value == "auto":
        return value
    if not value.isdigit() or not 1 <= int(value) <= 1000:
        raise typer.BadParameter(f"{value!r} is neither auto nor a whole number from 1 to 1000")
    return str(int(value))


BatchSize = Annotated[
    str,
    typer.Option(
        "--batch-size",
        metavar="N|auto",
        callback=_batch_size,
        help="Instance IDs per call (EC2 takes up to 1000). auto: start from the action's "
        "documented instance rate, then carry about half a second of what gets through, so "
        "calls leave about twice a second and the call bucket stays free for other clients.",
    ),
]


def batch_options(value: str, limits: Limits) -> tuple[int, bool]:
    """--batch-size as (the size, or the size to start from; whether it is auto)."""
    if value == "auto":
        return initial_size(limits), True
    return int(value), False


def _headroom(value: float) -> float:
    if not 0.0 <= value < 1.0:
        raise typer.BadParameter(f"{value:g} is not a share from 0 up to (not including) 1")
    return value


Headroom = Annotated[
    float,
    typer.Option(
        "--headroom",
        metavar="F",
        callback=_headroom,
        help="Leave this share of the rate found to the account's other clients (0.2: settle "
        "at 80% of it and never probe above). Throttles are how a rate limit is found, so "
        "the first few still happen.",
    ),
]
TraceOpt = Annotated[
    str | None,
    typer.Option(
        "--trace",
        metavar="PATH",
        help="Write the window's state at every call as JSON lines (time, cwnd, calls in "
        "flight, pace, phase, batch), for plotting.",
    ),
]
MaxWindow = Annotated[
    int,
    typer.Option(
        "--max-window", metavar="N", min=1, max=1000, help="Most calls ever in flight at once."
    ),
]
MinWindow = Annotated[
    int,
    typer.Option(
        "--min-window",
        metavar="N",
        min=1,
        max=1000,
        help="Fewest calls in flight allowed after throttles.",
    ),
]
# The rails, for a run and for an undo alike.
ExpectAccountOpt = Annotated[
    str | None,
    typer.Option(
        "--expect-account",
        metavar="ID",
        help="Refuse (exit 3) unless the credentials are this account's (checked with "
        "STS before anything else).",
    ),
]
ProtectTagOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--protect-tag",
        metavar="KEY[=VALUE]",
        help="Never touch instances carrying this tag: they are recorded failed "
        "(Protected); one whose tags cannot be read is not touched either (exit 3). "
        "Repeatable.",
    ),
]
MaxCountOpt = Annotated[
    int | None,
    typer.Option(
        "--max-count",
        metavar="N",
        min=0,
        help="Refuse (exit 3) a run of more than N instances.",
    ),
]
WindowOpt = Annotated[
    WindowChoice,
    typer.Option(
        "--window-profile",
        help="adaptive: the default: one call first, then a paced startup, then calls paced "
        "at the rate that has been getting through, probed upward on a clock; seed: the "
        "reference TCP profile, reproduced exactly; reno: the window alone, halved once per "
        "round trip; rate: swarm 0.2's default (a window, then a rate measured over a second).",
    ),
]
MaxAttempts = Annotated[
    int,
    typer.Option(
        "--max-attempts",
        metavar="N",
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
# Where and as whom: shared by every command that calls AWS.
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="REGION",
        envvar="AWS_REGION",
        help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's).",
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile", metavar="NAME", envvar="AWS_PROFILE", help="Named AWS profile for credentials."
    ),
]
EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        envvar="AWS_ENDPOINT_URL",
        help="EC2 (and STS) endpoint to call instead of AWS's, e.g. a swarm sandbox.",
    ),
]
AccountsOpt = Annotated[
    str | None,
    typer.Option(
        "--accounts",
        metavar="FILE",
        help="Accounts file (c7n-org style YAML or TOML: account_id, role, regions, "
        "external_id): each account's role is assumed with STS.",
    ),
]
RoleArnOpt = Annotated[
    str | None,
    typer.Option("--role-arn", metavar="ARN", help="One IAM role to assume for every instance."),
]
FilterOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        metavar="NAME=VALUE",
        help="Select instances instead of --ids, with EC2's filter names (tag:env=ci, "
        "instance-state-name=running, instance-type=t3.micro; several values a,b). "
        "Repeatable: all must match.",
    ),
]
OlderThanOpt = Annotated[
    str | None,
    typer.Option(
        "--older-than",
        metavar="AGE",
        help="Select instances launched at least this long ago (30m, 2h, 7d, 1w).",
    ),
]
ExcludeOpt = Annotated[
    str | None,
    typer.Option(
        "--exclude-ids", metavar="FILE", help="IDs never to select (an ID list, any format)."
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="One line per call on stderr: action, IDs, latency, outcome, window.",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="No progress, and no summary unless something is left to do."
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
        metavar="SECONDS",
        min=0,
        help="On SIGINT/SIGTERM/SIGHUP: seconds to wait for calls in flight before recording "
        "the rest pending and exiting (a second signal stops the wait).",
    ),
]
CallTimeout = Annotated[
    float | None,
    typer.Option(
        "--call-timeout",
        metavar="SECONDS",
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
        metavar="SECONDS",
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


def require_sandbox(err: Console) -> None:
    from ..sandbox import missing_extra

    problem = missing_extra()
    if problem:
        raise UsageError(problem)


def window_profile(choice: WindowChoice, min_window: int, max_window: int, err: Console) -> Profile:
    try:
        return PROFILES[choice.value].bounded(min_window=min_window, max_window=max_window)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def finish(
    report: Report, output: Output, out: Console, err: Console, *, quiet: bool = False
) -> int:
    """Print the run's summary (and its JSON object); the exit code the command returns."""
    speak = not quiet or report.exit_code != 0
    if output is Output.json:
        if speak:
            render_summary(report, err)
        emit_json({**report.to_dict(), "meaning": exit_meaning(report.exit_code)})
    elif speak:
        render_summary(report, out)
    return report.exit_code


@contextlib.contextmanager
def interruptible(err: Console) -> Iterator[None]:
    """Ctrl-C while a sandbox is being set up: stop cleanly with 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted("interrupted", plain=True) from None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
