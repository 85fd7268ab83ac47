"""Selection: the instances to act on, found by EC2 filters instead of listed by ID.

``--filter`` takes EC2's own DescribeInstances filter names (``tag:env=ci``,
``instance-state-name=running,stopped``), so that what a user already knows from
the console or the AWS CLI means the same here. The filtering happens in EC2;
only ``--older-than`` and ``--exclude-ids`` are applied here, to what EC2 returned.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from .ec2 import classify_exception
from .errors import EXIT_CREDENTIALS, EXIT_FAILED, EXIT_USAGE, SwarmError
from .outcome import Kind
from .text import not_utf8
from .window import Control

# EC2 takes MaxResults from 5 to 1000; the largest page costs the fewest calls of a
# bucket that every Describe* action of the account and region shares.
PAGE_SIZE = 1000
MIN_PAGE_SIZE = 5
# The pause after a throttled page when no window paces the calls: doubled per throttle
# in a row, so that a bucket refilling at a few tokens a second is not hammered.
FIRST_PAUSE = 0.1
MAX_PAUSE = 5.0
ITEM_ATTEMPTS = 5  # reads of what uses a page's resources, server errors (throttles apart)

_AGE = re.compile(r"(?:\d+[smhdw])+", re.ASCII)
_AGE_PART = re.compile(r"(\d+)([smhdw])", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

Filter = dict[str, Any]  # {"Name": "tag:env", "Values": ["ci"]}, as boto3 takes it


# What EC2 answers a Describe call given a filter it does not take.
BAD_FILTER_CODES = frozenset({"InvalidParameterValue", "InvalidFilter"})


class SelectError(SwarmError):
    """A selection that cannot be made; one line, fit for the terminal and a CI log.

    ``code`` is EC2's error code (or the exception's name) when EC2 refused a page,
    ``exit_code`` what the CLI should exit with.
    """

    def __init__(self, message: str, *, code: str | None = None, exit_code: int = EXIT_USAGE):
        super().__init__(message, exit_code=exit_code)
        self.code = code


@dataclass(frozen=True)
class Selected:
    """One instance (or other resource) a selection found, with what a confirmation or a
    rail needs of it. ``launch_time`` is a resource's creation time; ``in_use`` says why
    EC2 would refuse to delete it, or None."""

    id: str
    state: str
    type: str | None
    launch_time: datetime | None
    # Left out of the hash: a dict cannot be hashed, and the ID already identifies it.
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    name: str | None = None
    in_use: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly, for ``swarm list --output json``."""
        return {
            "id": self.id,
            "state": self.state,
            "type": self.type,
            "launch_time": None if self.launch_time is None else self.launch_time.isoformat(),
            "name": self.name,
            "tags": dict(self.tags),
        }


def parse_filter(spec: str) -> Filter:
    """``NAME=V1,V2`` as a DescribeInstances filter: ``{"Name": NAME, "Values": [V1, V2]}``.

    The name is EC2's (``tag:KEY``, ``instance-state-name``, ``instance-type``, …) and
    is not checked here: EC2 knows its own filter names better than a copy would.
    The comma separates values; a value that holds one writes it ``\\,`` (and a
    backslash ``\\\\``): ``tag:Name=a\\,b`` is the one value ``a,b``.
    """
    if (bad := not_utf8("--filter", spec)) is not None:
        raise SelectError(bad)
    text = spec.strip()
    if text.lower().startswith("name="):
        raise SelectError(
            f"--filter {spec!r}: write the AWS CLI's Name=...,Values=... as NAME=VALUE "
            "(e.g. tag:env=ci or instance-state-name=running,stopped)"
        )
    name, eq, raw_values = text.partition("=")
    name = name.strip()
    if not eq or not name:
        raise SelectError(f"--filter {spec!r}: expected NAME=VALUE[,VALUE...] (e.g. tag:env=ci)")
    if name.startswith("tag:") and not name[4:].strip():
        raise SelectError(f"--filter {spec!r}: tag: needs a tag key (e.g. tag:env=ci)")
    values = [v.strip() for v in _split_values(raw_values)]
    if not raw_values.strip() or any(not v for v in values):
        raise SelectError(
            f"--filter {spec!r}: empty value; give one or more values separated by commas"
        )
    return {"Name": name, "Values": list(dict.fromkeys(values))}


def _split_values(text: str) -> list[str]:
    """``a,b\\,c`` as ``["a", "b,c"]``: a comma separates values unless a backslash
    comes before it. Every other backslash is left as typed: EC2's own escapes in a
    filter value (``\\*``, ``\\?``, ``\\\\``) reach it unchanged."""
    values = re.split(r"(?<!\\),", text)
    return [v.replace("\\,", ",") for v in values]


def filter_text(filters: Iterable[Filter]) -> str:
    """The filters as a user writes them, a comma inside a value escaped: what was asked
    is what is shown (``tag:Name=a\\,b`` is one value, ``tag:Name=a,b`` two)."""
    escaped = "\\,"
    return ", ".join(
        f"{f['Name']}={','.join(v.replace(',', escaped) for v in f['Values'])}" for f in filters
    )


def parse_filters(specs: Iterable[str]) -> list[Filter]:
    """Every ``--filter``, each name once.

    EC2 ANDs separate filters and ORs the values of one. A name given twice is refused:
    merged it would mean either value (a broader selection than "all must match", the
    wrong way round for a command that terminates what it selects), and apart it means
    both, which for most names (one tag value, one state) matches nothing.
    """
    seen: dict[str, tuple[str, Filter]] = {}
    for spec in specs:
        parsed = parse_filter(spec)
        name = parsed["Name"]
        if name in seen:
            first, earlier = seen[name]
            either = ",".join(dict.fromkeys([*earlier["Values"], *parsed["Values"]]))
            raise SelectError(
                f"--filter {name} is given twice ({first!r} and {spec!r}): give it once, "
                f"with its values separated by commas for either of them ({name}={either}); "
                "for instances with both of two tag keys, one filter per key "
                "(tag:a=* and tag:b=*)"
            )
        seen[name] = (spec, parsed)
    return [parsed for _, parsed in seen.values()]


def parse_age(text: str) -> timedelta:
    """``90s``, ``30m``, ``2h``, ``7d``, ``2w`` or a sum such as ``1d12h`` as a timedelta."""
    compact = text.strip()
    if not _AGE.fullmatch(compact):
        raise SelectError(
            f"--older-than {text!r}: expected a number and a unit "
            "(s, m, h, d or w), e.g. 2h, 7d or 1d12h"
        )
    age = timedelta()
    try:
        for number, unit in _AGE_PART.findall(compact):
            age += timedelta(**{_UNITS[unit]: int(number)})
    except OverflowError:  # past timedelta's 999,999,999 days
        raise SelectError(f"--older-than {text!r}: too long") from None
    return age


def _selected(instance: Mapping[str, Any]) -> Selected:
    tags = {t["Key"]: t.get("Value", "") for t in instance.get("Tags") or () if "Key" in t}
    launched = instance.get("LaunchTime")
    return Selected(
        id=instance["InstanceId"],
        state=(instance.get("State") or {}).get("Name", "unknown"),
        type=instance.get("InstanceType"),
        launch_time=launched if isinstance(launched, datetime) else None,
        tags=tags,
        name=tags.get("Name"),
    )


Items = Callable[[Mapping[str, Any]], Iterable[Selected]]


@dataclass(frozen=True)
class Listing:
    """How one Describe call lists one kind of resource: its method, what each request
    carries (``OwnerIds=["self"]``: without it DescribeSnapshots lists every public
    snapshot), the largest page (None: the call has no pages) and each page's items."""

    kind: str  # "instance", "snapshot"
    api: str  # "DescribeInstances"
    method: str  # "describe_instances"
    items: Items
    request: Mapping[str, Any] = field(default_factory=dict, hash=False)
    page_size: int | None = PAGE_SIZE


def _instances(page: Mapping[str, Any]) -> Iterable[Selected]:
    for reservation in page.get("Reservations", []):
        for instance in reservation.get("Instances", []):
            yield _selected(instance)


INSTANCES = Listing("instance", "DescribeInstances", "describe_instances", _instances)


def _old_enough(instance: Selected, older_than: timedelta, now: datetime) -> bool:
    # Without a launch time its age is unknown; leaving it out is the safe side of a
    # filter whose purpose is to spare the young ones.
    if instance.launch_time is None:
        return False
    launched = instance.launch_time
    if launched.tzinfo is None:
        launched = launched.replace(tzinfo=timezone.utc)
    return now - launched >= older_than


def contradicts(chosen: Selected, filters: Sequence[Filter], *, instances: bool) -> str | None:
    """The first of ``filters`` that ``chosen`` plainly does not match, shown as given
    (None: none). Only the filters its own fields answer: ``tag:KEY``, ``tag-key``,
    and for instances ``instance-state-name`` and ``instance-id``; values match as EC2's
    do (``*`` and ``?`` wildcards, a backslash before one for the character itself)."""
    for f in filters:
        name, values = f["Name"], list(f["Values"])
        if name.startswith("tag:"):
            key = name[4:]
            ok = key in chosen.tags and _any_match(values, chosen.tags[key])
        elif name == "tag-key":
            ok = any(_any_match(values, k) for k in chosen.tags)
        elif instances and name == "instance-state-name":
            ok = _any_match(values, chosen.state)
        elif instances and name == "instance-id":
            ok = _any_match(values, chosen.id)
        else:
            continue
        if not ok:
            return f"{name}={','.join(values)}"
    return None


def _any_match(patterns: Sequence[str], value: str) -> bool:
    return any(_pattern(p).fullmatch(value) for p in patterns)


@functools.lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    """An EC2 filter value as a regular expression: ``*`` any run, ``?`` one character,
    ``\\*``, ``\\?`` and ``\\\\`` the character itself."""
    parts = re.split(r"(\\[*?\\]|[*?])", text)
    out = []
    for k, part in enumerate(parts):
        if k % 2 == 0:  # between the specials
            out.append(re.escape(part))
        elif part in ("*", "?"):
            out.append(".*" if part == "*" else ".")
        else:
            out.append(re.escape(part[1]))
    return re.compile("".join(out), re.DOTALL)


def select(
    client: Any,
    filters: Sequence[Filter],
    *,
    older_than: timedelta | None = None,
    exclude: set[str] | frozenset[str] = frozenset(),
    now: datetime,
    window: Control | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    page_size: int = PAGE_SIZE,
    listing: Listing = INSTANCES,
) -> list[Selected]:
    """The instances DescribeInstances returns for ``filters``, all pages, in EC2's order
    (or the resources of another ``listing``).

    Then only those launched at least ``older_than`` before ``now`` (a naive ``now``
    or launch time is taken as UTC), minus the IDs in ``exclude``. No filters at all
    selects every instance of the client's account and region.

    Pages follow one another (each needs the last one's token), so there is never
    more than one call in flight: the window, when given, only paces the chain. A
    throttled page is asked again after a pause, never counted as a failure: the
    window's gap when it paces, else ``FIRST_PAUSE`` doubled per throttle in a row
    up to ``MAX_PAUSE``. Any other error raises SelectError with EC2's code.
    """
    if not MIN_PAGE_SIZE <= page_size <= PAGE_SIZE:
        raise ValueError(f"page_size must be {MIN_PAGE_SIZE} to {PAGE_SIZE}, not {page_size}")
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    request: dict[str, Any] = dict(listing.request)
    if listing.page_size is not None:
        request["MaxResults"] = min(page_size, listing.page_size)
    if filters:
        request["Filters"] = [{"Name": f["Name"], "Values": list(f["Values"])} for f in filters]
    found: dict[str, Selected] = {}
    tokens_seen: set[str] = set()
    pause = FIRST_PAUSE
    item_errors = 0
    while True:
        if window is not None:
            wait = window.send_at() - clock()
            if wait > 0:
                sleep(wait)
            ticket = window.on_send(clock())
        started = clock()
        try:
            page = getattr(client, listing.method)(**request)
        except Exception as err:
            outcome = classify_exception(err)
            if outcome.kind is not Kind.THROTTLED:
                exit_code = EXIT_CREDENTIALS if outcome.kind is Kind.FATAL else EXIT_FAILED
                detail = f": {outcome.message}" if outcome.message else ""
                if filters and outcome.code in BAD_FILTER_CODES:
                    # A filter name or value EC2 does not take: the command line's to mend.
                    exit_code = EXIT_USAGE
                    detail += f" (check --filter against {listing.api}'s filter names)"
                raise SelectError(
                    f"{listing.api} failed: {outcome.code}{detail}",
                    code=outcome.code,
                    exit_code=exit_code,
                ) from None
            gap = 0.0
            if window is not None:
                window.on_throttle(ticket, clock())
                gap = window.send_at() - clock()
            # A window that is not pacing (still above one call, or a profile without
            # pacing) gives no gap: asking again at once would only be throttled again.
            if gap <= 0:
                gap = pause
                pause = min(pause * 2, MAX_PAUSE)
            sleep(gap)
            continue
        if window is not None:
            end = clock()
            window.on_success(ticket, end - started, end, in_flight=1)
        pause = FIRST_PAUSE
        try:
            # (Reading a page may ask more: which AMIs use the snapshots listed.)
            items = list(listing.items(page))
        except Exception as err:
            outcome = classify_exception(err)
            item_errors += outcome.kind is not Kind.THROTTLED
            if outcome.kind in (Kind.THROTTLED, Kind.TRANSIENT) and item_errors < ITEM_ATTEMPTS:
                sleep(pause)  # the page asked again, and what it asks
                pause = min(pause * 2, MAX_PAUSE)
                continue
            detail = f": {outcome.message}" if outcome.message else ""
            raise SelectError(
                f"{listing.api}: what uses them (DescribeImages) could not be read: "
                f"{outcome.code}{detail}",
                code=outcome.code,
                exit_code=EXIT_CREDENTIALS if outcome.kind is Kind.FATAL else EXIT_FAILED,
            ) from None
        # Keyed by ID: an instance changing state between pages may be listed twice.
        for chosen in items:
            wrong = contradicts(chosen, filters, instances=listing is INSTANCES)
            if wrong is not None:
                # The endpoint did not apply the filters (a proxy, a stand-in for EC2): what
                # it lists is no selection to act on.
                raise SelectError(
                    f"{listing.api} listed {chosen.id}, which does not match the filter "
                    f"{wrong}: the endpoint did not apply the filters; nothing was sent",
                    code="FilterNotApplied",
                    exit_code=EXIT_FAILED,
                )
            found[chosen.id] = chosen
        # EC2 may answer a page with no instances and a token: only a missing token ends it.
        token = page.get("NextToken")
        if not token:
            break
        if token in tokens_seen:
            raise SelectError(
                f"{listing.api} repeated a page token; stopping rather than looping",
                code="RepeatedNextToken",
                exit_code=EXIT_FAILED,
            )
        tokens_seen.add(token)
        request["NextToken"] = token
    return [
        s
        for s in found.values()
        if s.id not in exclude and (older_than is None or _old_enough(s, older_than, now))
    ]
