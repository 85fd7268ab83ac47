"""The options the commands share, declared once, and :class:`Flags`: what a user asked of
one action run, gathered from the command line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

import typer

from ..actions.base import Limits
from ..batching import initial_size
from ..errors import UsageError
from ..run import RunOptions
from ..text import plural
from ..window import PROFILES, Profile


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


# Options shared by the commands that run an action.
def check_batch_size(value: str) -> str:
    value = value.strip().lower()
    if value == "auto":
        return value
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 1000:
        raise typer.BadParameter(f"{value!r} is neither auto nor a whole number from 1 to 1000")
    return str(int(value))


BATCH_SIZE_HELP = (
    "IDs per call (EC2 takes up to 1000). auto: start from half a second of the "
    "action's documented instance rate, or more where its instance burst is much larger "
    "than its call burst (a start: 200), and never go below half a second of that rate; "
    "then carry what gets through in the time that keeps calls at half the documented "
    "call refill (about two a second; one for a start), so the call bucket stays free "
    "for other clients."
)
BatchSize = Annotated[
    str,
    typer.Option("--batch-size", metavar="N|auto", callback=check_batch_size, help=BATCH_SIZE_HELP),
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


def headroom_option(hidden: bool = False) -> Any:
    """--headroom (hidden where nothing is sent: swarm plan)."""
    return typer.Option(
        "--headroom",
        metavar="F",
        callback=_headroom,
        hidden=hidden,
        help="Leave this share of the rate found to the account's other clients (0.2: settle "
        "at 80% of it and never probe above). Throttles are how a rate limit is found, so "
        "the first few still happen.",
    )


def trace_option(hidden: bool = False) -> Any:
    """--trace (hidden where nothing is sent: swarm plan)."""
    return typer.Option(
        "--trace",
        metavar="PATH",
        hidden=hidden,
        help="Write the window's state at every call as JSON lines (time, cwnd, calls in "
        "flight, pace, phase, batch), for plotting.",
    )


Headroom = Annotated[float, headroom_option()]
TraceOpt = Annotated[str | None, trace_option()]


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
        help=(
            "Fewest calls in flight ever allowed, the first included: above 1, the first "
            "call no longer goes alone."
        ),
    ),
]


# The rails, for a run and for an undo alike.
ExpectAccountOpt = Annotated[
    str | None,
    typer.Option(
        "--expect-account",
        metavar="ID",
        help="Refuse (exit 3) unless the credentials swarm starts from are this account's "
        "(checked with STS before anything else). With --accounts or --role-arn, that is "
        "the account the roles are assumed from, not the accounts acted on.",
    ),
]


def protect_tag_help(noun: str = "instance") -> str:
    return (
        f"Never touch {plural(noun)} carrying this tag: they are recorded failed (Protected); one "
        "whose tags cannot be read is not touched either (exit 3). Repeatable."
    )


ProtectTagOpt = Annotated[
    list[str] | None,
    typer.Option("--protect-tag", metavar="KEY[=VALUE]", help=protect_tag_help()),
]


def max_count_help(noun: str = "instance") -> str:
    return (
        f"Refuse (exit 3) a run of more than N {plural(noun)}. With --shard, each shard counts its "
        "own: N shards may act on N times as many in all."
    )


MaxCountOpt = Annotated[
    int | None,
    typer.Option("--max-count", metavar="N", min=0, help=max_count_help()),
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
        help="Tries per ID on server errors and timeouts (throttles never count).",
    ),
]


OutputOpt = Annotated[
    Output,
    typer.Option(
        "--output", "-o", help="text: a summary for people; json: one summary object on stdout."
    ),
]


def _region(value: str | None) -> str | None:
    """A region named empty is refused: most often a variable the script did not set
    (``--region "$R"``), and taking the default region for it acts somewhere else."""
    if value is not None and not value.strip():
        raise typer.BadParameter(
            "is empty (a variable that was not set?): name a region, or leave --region out "
            "for the default one"
        )
    return value


# Where and as whom: shared by every command that calls AWS.
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="REGION",
        envvar="AWS_REGION",
        callback=_region,
        help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's).",
    ),
]


ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile", metavar="NAME", envvar="AWS_PROFILE", help="Named AWS profile for credentials."
    ),
]


def _endpoint_url(value: str | None) -> str | None:
    """An http(s) URL with a host and a valid port, or none: what botocore can call."""
    if not value:
        return value
    from urllib.parse import urlsplit

    from ..targets import quote

    # What may hold a secret (user info, a query) is not repeated.
    visible = value.split("?", 1)[0]
    if "@" in visible:
        scheme, sep, rest = visible.partition("://")
        visible = f"{scheme}{sep}***@{rest.rpartition('@')[2]}"
    shown = quote(visible, width=80)
    try:
        parts = urlsplit(value)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise typer.BadParameter(f"{shown} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(f"{shown} is not an http:// or https:// URL with a host")
    if port == 0:
        raise typer.BadParameter(f"{shown} names port 0")
    return value


EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        callback=_endpoint_url,
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
    typer.Option("--role-arn", metavar="ARN", help="One IAM role to assume for every call."),
]


FILTER_HELP = (
    "Select instances instead of --ids, with EC2's filter names (tag:env=ci, "
    "instance-state-name=running, instance-type=t3.micro; several values a,b; a comma "
    "inside a value \\,). "
    "Repeatable, each name once: all must match."
)
OLDER_THAN_HELP = "Select instances launched at least this long ago (30m, 2h, 7d, 1w)."


ExcludeOpt = Annotated[
    str | None,
    typer.Option(
        "--exclude-ids",
        metavar="FILE",
        help="IDs never to act on or list, taken out of the list (--ids) or the selection "
        "(an ID list of the same kind, any format).",
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
        "recording the rest pending and exiting 1. A reboot's look-up of terminated "
        "instances gives up after as long without an answer that read any (10 s at "
        "least), and sends the rest unchecked.",
    ),
]


MissingOk = Annotated[
    bool,
    typer.Option(
        "--missing-ok",
        help="IDs that do not exist count as done for the exit code (a retry loop can go green).",
    ),
]


def window_profile(choice: WindowChoice, min_window: int, max_window: int) -> Profile:
    try:
        return PROFILES[choice.value].bounded(min_window=min_window, max_window=max_window)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


@dataclass(frozen=True)
class Flags:
    """What a user asked of one action run, gathered from the command line."""

    ids: str | None
    region: str | None
    profile: str | None
    endpoint_url: str | None
    ledger: str
    resume: bool
    yes: bool
    dry_run: bool
    sandbox: bool
    params: Mapping[str, Any]
    options: RunOptions
    output: Output
    accounts: str | None = None
    role_arn: str | None = None
    shard: str | None = None
    max_errors: str | None = None
    rollback: bool = False
    wait: bool = False
    wait_timeout: float = 600.0
    quiet: bool = False
    report: str | None = None
    filters: Sequence[str] = ()
    older_than: str | None = None
    exclude_ids: str | None = None
    expect_account: str | None = None
    protect_tags: Sequence[str] = ()
    max_count: int | None = None
    check_protection: bool = True
    plan_out: str | None = None
