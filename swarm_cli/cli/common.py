"""What every command shares: the Typer app, the consoles, the options, and how a run ends."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup
from typer.exceptions import TyperException

from .. import __version__
from ..actions.base import Limits
from ..batching import initial_size
from ..display import render_summary
from ..report import Report
from ..run import EXIT_INTERRUPTED, EXIT_USAGE
from ..text import literal
from ..window import PROFILES, Profile

EXIT_MEANINGS = {
    0: "all done",
    1: "some intents failed or are pending (the ledger names them)",
    2: "bad usage or input; nothing was sent",
    3: "refused by a guard or at the confirmation",
    4: "credentials or permission",
    74: "the ledger could not be written",
    130: "interrupted (SIGINT)",
}


def exit_meaning(code: int) -> str:
    """What an exit code says, in words (the README's table)."""
    if code in EXIT_MEANINGS:
        return EXIT_MEANINGS[code]
    if code > 128:
        import signal

        try:
            return f"stopped by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return "unexpected"


class _JsonOutput:
    """With --output json: whether the one object has been written, and the first error."""

    def __init__(self) -> None:
        self.written = False
        self.error: str | None = None


_json = _JsonOutput()


def _wants_json(argv: Sequence[str]) -> bool:
    for k, arg in enumerate(argv):
        if arg in ("--output=json", "-ojson"):
            return True
        if arg in ("--output", "-o") and k + 1 < len(argv) and argv[k + 1] == "json":
            return True
    return False


def emit_json(data: Mapping[str, Any]) -> None:
    """The one object --output json prints on stdout."""
    _json.written = True
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


class JsonGroup(TyperGroup):
    """The top command: with --output json, stdout holds one object whatever happens.

    Refusals, usage errors and failures that end before a command prints its own
    object print ``{"exit_code", "meaning", "error"}`` instead of nothing.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        argv = kwargs.get("args", args[0] if args else None)
        argv = list(sys.argv[1:] if argv is None else argv)
        if not _wants_json(argv) or not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        global _json
        _json = _JsonOutput()
        kwargs["standalone_mode"] = False
        code = 0
        try:
            returned = super().main(*args, **kwargs)
            code = returned if isinstance(returned, int) else 0
        except typer.Abort:
            code = EXIT_INTERRUPTED
        except TyperException as exc:  # click's usage errors, as typer carries them
            getattr(exc, "show", lambda: None)()
            format_message = getattr(exc, "format_message", None)
            message = format_message() if format_message else str(exc)
            _json.error = _json.error or str(message)
            code = int(getattr(exc, "exit_code", 1))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:  # a bug: still one object, and the traceback on stderr
            import traceback

            traceback.print_exc()
            _json.error = f"{type(exc).__name__}: {exc}"
            code = 1
        if not _json.written:
            emit_json({"exit_code": code, "meaning": exit_meaning(code), "error": _json.error})
        sys.exit(code)


app = typer.Typer(
    name="swarm",
    cls=JsonGroup,
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


def error(err: Console, message: str) -> None:
    """One error line; the message is text, never markup (it may hold paths, IDs, [extras]),
    its control characters made visible (see ``swarm_cli.text``)."""
    if _json.error is None:
        _json.error = message
    err.print(Text.assemble(("error:", "bold red"), " ", literal(message)))


def warn(err: Console, message: str) -> None:
    err.print(Text.assemble(("warning:", "yellow"), " ", literal(message)))


def fail(err: Console, message: str, code: int) -> NoReturn:
    error(err, message)
    raise typer.Exit(code)


def version_text() -> str:
    import platform

    import boto3
    import botocore

    return (
        f"swarm {__version__} (boto3 {boto3.__version__}, botocore {botocore.__version__}, "
        f"Python {platform.python_version()})"
    )


def _version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


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
        fail(err, problem, EXIT_USAGE)


def window_profile(choice: WindowChoice, min_window: int, max_window: int, err: Console) -> Profile:
    try:
        return PROFILES[choice.value].bounded(min_window=min_window, max_window=max_window)
    except ValueError as exc:
        fail(err, str(exc), EXIT_USAGE)


def finish(
    report: Report, output: Output, out: Console, err: Console, *, quiet: bool = False
) -> NoReturn:
    speak = not quiet or report.exit_code != 0
    if output is Output.json:
        if speak:
            render_summary(report, err)
        emit_json({**report.to_dict(), "meaning": exit_meaning(report.exit_code)})
    elif speak:
        render_summary(report, out)
    raise typer.Exit(report.exit_code)


@contextlib.contextmanager
def interruptible(err: Console) -> Iterator[None]:
    """Ctrl-C while a sandbox is being set up: stop cleanly with 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
