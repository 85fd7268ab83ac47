"""What EC2 shows of the resources an operation names, read through the engine.

A plan (``--dry-run``) and a resume ask the operation's Describe call (its entry's
:class:`~swarm_cli.actions.operations.Observe`) about every ID, batched and through a
window on the Describe bucket as :mod:`swarm_cli.describe` reads instances: an ID not
listed (or in a gone state) is gone, which for a deletion is done; one listed may be in
use, which EC2 would refuse.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.parsers import ResponseParserError
from rich.console import Console

from .actions import DESCRIBE_LIMITS, ActionSpec
from .actions.operations import Observe, Operation
from .describe import MakeClient, classify_setup, read_options, stop_if_interrupted
from .ec2 import BatchCall, answered_by
from .operation_call import ALREADY_GONE_CODE, OperationCall
from .outcome import Kind, Outcome
from .report import Pair, Reason, Recorded
from .run import Job, RunOptions
from .select import Listing, Selected

if TYPE_CHECKING:
    from .plan import Plan

_Reader = TypeVar("_Reader", bound=BatchCall)
# EC2 takes up to 200 values in one filter.
MAX_FILTER_VALUES = 200


@dataclass(frozen=True)
class Seen:
    """One resource as its Describe call showed it; ``state`` None when it is gone."""

    id: str
    state: str | None
    in_use: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    type: str | None = None  # a volume's type, an image's architecture, an address's domain
    created: datetime | None = None
    name: str | None = None  # the Name tag, or an image's name

    @property
    def gone(self) -> bool:
        return self.state is None


def images_using(client: Any) -> dict[str, str]:
    """Snapshot -> the account's AMI that uses it (a disabled AMI still holds its
    snapshots, and DescribeImages leaves those out unless asked)."""
    used: dict[str, str] = {}
    images = client.describe_images(Owners=["self"], IncludeDisabled=True)
    for image in images.get("Images", []):
        for mapping in image.get("BlockDeviceMappings") or []:
            snapshot = (mapping.get("Ebs") or {}).get("SnapshotId")
            if snapshot:
                used[snapshot] = image["ImageId"]
    return used


def listing(op: Operation, client: Any) -> Listing:
    """How ``swarm list`` and ``--filter`` list the account's resources of ``op``."""
    if op.observe is None:
        raise ValueError(f"{op.name} has no Describe call to list with")
    o = op.observe
    images: dict[str, str] | None = None

    def used_by() -> Mapping[str, str]:
        nonlocal images
        if images is None:
            images = images_using(client)
        return images

    def items(page: Mapping[str, Any]) -> Iterable[Selected]:
        for item in page.get(o.key, []):
            state = str(item.get("State") or "present")
            if state in o.gone_states:
                continue
            tags = {t["Key"]: t.get("Value", "") for t in item.get("Tags") or () if "Key" in t}
            yield Selected(
                id=str(item[o.id_key]),
                state=state,
                type=None if o.type_key is None else item.get(o.type_key),
                launch_time=_when(item.get(o.created)) if o.created else None,
                tags=tags,
                name=tags.get("Name") or item.get("Name"),
                in_use=o.in_use(item, used_by) if o.in_use else None,
            )

    return Listing(
        op.resource,
        observe_api(op),
        o.method,
        items,
        {**{k: list(v) for k, v in o.owned}, **dict(o.always)},
        o.page_size,
    )


def _when(value: Any) -> datetime | None:
    """A Describe item's time: a datetime from botocore, or ISO 8601 text (CreationDate)."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


_IN_USE = "swarm:in_use"  # where Look.send leaves why each item would be refused


class Look(BatchCall):
    """An engine action: one filtered Describe call for a batch of IDs."""

    changes = False

    split_codes: frozenset[str] = frozenset()

    def __init__(self, client: Any, observe: Observe, in_use: bool = True) -> None:
        self.client = client
        self.observe = observe
        # Whether to say why EC2 would refuse each one (a plan, swarm list): a resume
        # needs only what is gone, and no DescribeImages for it.
        self.in_use = in_use and observe.in_use is not None
        self._lock = threading.Lock()
        self._seen: dict[str, Seen] = {}
        self._images: dict[str, str] | None = None
        self.image_calls = 0

    @property
    def seen(self) -> dict[str, Seen]:
        with self._lock:
            return dict(self._seen)

    def images(self) -> Mapping[str, str]:
        """Snapshot -> the account's AMI that uses it (asked once)."""
        with self._lock:
            if self._images is not None:
                return self._images
            self.image_calls += 1
        used = images_using(self.client)
        with self._lock:
            self._images = used
        return used

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        response = describe(self.client, self.observe, ids)
        o = self.observe
        if not self.in_use or o.in_use is None:
            return response
        # Why each would be refused, asked here: a read refused (DescribeImages denied)
        # is the call's failure, classified as such, not an error retried blindly.
        reasons = {
            item.get(o.id_key): o.in_use(item, self.images) for item in response.get(o.key, [])
        }
        return {**response, _IN_USE: reasons}

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        o = self.observe
        seen: dict[str, Seen] = {}
        reasons: Mapping[Any, str | None] = response.get(_IN_USE, {})
        for item in response.get(o.key, []):
            i = item.get(o.id_key)
            state = str(item.get("State") or "present")
            if i not in ids or state in o.gone_states:
                continue
            reason = reasons.get(i)
            tags = {t["Key"]: t.get("Value", "") for t in item.get("Tags") or [] if "Key" in t}
            seen[i] = Seen(
                i,
                state,
                reason,
                tags,
                type=None if o.type_key is None else str(item.get(o.type_key) or "") or None,
                created=_when(item.get(o.created)) if o.created else None,
                name=tags.get("Name") or item.get("Name"),
            )
        for i in ids:
            seen.setdefault(i, Seen(i, None))
        with self._lock:
            self._seen.update(seen)
        return dict.fromkeys(ids, Outcome(Kind.SUCCEEDED, None, None, *answered_by(response)))


class TagLook(BatchCall):
    """An engine action: DescribeTags for a batch of IDs of any resource type.

    Every ID of a call that answered is read (with no tags if none of ``keys`` is on it,
    or if it does not exist); the IDs of a call that failed are not.
    """

    changes = False

    split_codes: frozenset[str] = frozenset()

    def __init__(self, client: Any, keys: Sequence[str]) -> None:
        self.client = client
        # EC2's filter values take * and ? as wildcards (and \ escapes them): a key
        # holding one would ask for other keys or miss its own, so all are read instead.
        self.keys = [] if any(c in k for k in keys for c in "*?\\") else list(dict.fromkeys(keys))
        self._lock = threading.Lock()
        self._tags: dict[str, dict[str, str]] = {}

    @property
    def tags(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return dict(self._tags)

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        filters = [{"Name": "resource-id", "Values": list(ids)}]
        if self.keys:
            filters.append({"Name": "key", "Values": self.keys})
        request: dict[str, Any] = {"Filters": filters, "MaxResults": 1000}
        found: list[Mapping[str, Any]] = []
        seen: set[str] = set()
        while True:
            page: Mapping[str, Any] = self.client.describe_tags(**request)
            found.extend(page.get("Tags", []))
            token = page.get("NextToken")
            if not token:
                return {**page, "Tags": found}
            if token in seen:
                # The pages after it unread: their resources' tags are not known none.
                raise ResponseParserError("DescribeTags repeated a page token")
            seen.add(token)
            request["NextToken"] = token

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        tags: dict[str, dict[str, str]] = {i: {} for i in ids}
        for tag in response.get("Tags", []):
            on = tags.get(str(tag.get("ResourceId")))
            if on is not None and "Key" in tag:
                on[tag["Key"]] = tag.get("Value", "")
        with self._lock:
            self._tags.update(tags)
        return dict.fromkeys(ids, Outcome(Kind.SUCCEEDED, None, None, *answered_by(response)))


def look(
    op: Operation,
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    unread: dict[str, str] | None = None,
    fatal: list[Reason] | None = None,
    calls: dict[str, int] | None = None,
    in_use: bool = True,
) -> dict[Pair, dict[str, Seen]]:
    """Each pair's resources as seen; an ID that could not be read is left out (and put in
    ``unread`` with why). Why the reads ended before they could look (credentials,
    permission) goes to ``fatal``; the calls made, by API, are added to ``calls``."""
    if op.observe is None:
        return {}
    observe = op.observe
    looks = _read_through(
        f"look-{op.resource}",
        observe.method,
        op.resource,
        groups,
        lambda pair: Look(make_client(pair), observe, in_use),
        console,
        options,
        {} if unread is None else unread,
        fatal,
        calls,
    )
    images = sum(reader.image_calls for reader in looks.values())
    if calls is not None and images:
        calls["DescribeImages"] = calls.get("DescribeImages", 0) + images
    return {p: looks[p].seen if p in looks else {} for p in groups if groups[p]}


def tags_of(
    groups: Mapping[Pair, Sequence[str]],
    keys: Sequence[str],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    calls: dict[str, int] | None = None,
) -> tuple[dict[Pair, dict[str, dict[str, str]]], dict[str, str]]:
    """Each pair's resources' tags (those of ``keys``, or all), read with DescribeTags; and
    the IDs that could not be read, each with EC2's reason. The calls made are added to
    ``calls``."""
    unread: dict[str, str] = {}
    reads = _read_through(
        "read-tags",
        "describe_tags",
        "resource",
        groups,
        lambda pair: TagLook(make_client(pair), keys),
        console,
        options,
        unread,
        calls=calls,
    )
    return {p: reads[p].tags if p in reads else {} for p in groups if groups[p]}, unread


def _read_through(
    name: str,
    method: str,
    resource: str,
    groups: Mapping[Pair, Sequence[str]],
    make: Callable[[Pair], _Reader],
    console: Console,
    options: RunOptions,
    unread: dict[str, str],
    fatal: list[Reason] | None = None,
    calls: dict[str, int] | None = None,
) -> dict[Pair, _Reader]:
    """Run ``make(pair)``'s reads over every pair's IDs, batched by the filter's limit and
    paced on the Describe bucket; returns each pair's reader, and puts each ID that could
    not be read in ``unread`` with why (and in ``fatal`` why the reads ended, if so, and
    in ``calls`` the calls made, throttled ones included)."""
    api = "".join(w.capitalize() for w in method.split("_"))
    spec = ActionSpec(
        name=name, api=method, method=method, verb="read", limits=DESCRIBE_LIMITS, resource=resource
    )
    readers: dict[Pair, _Reader] = {}

    def make_action(pair: Pair) -> _Reader:
        readers[pair] = make(pair)
        return readers[pair]

    wanted = {p: list(ids) for p, ids in groups.items() if ids}
    read = read_options(options, MAX_FILTER_VALUES)
    from .views import run_job

    report = run_job(
        Job(spec, wanted, read, title=api),
        make_action,
        console,
        classify=classify_setup,
    )
    stop_if_interrupted(report)
    if calls is not None:
        calls[api] = calls.get(api, 0) + report.total_of("calls")
    for problem in report.problems:
        unread[problem.id] = ": ".join(filter(None, (problem.code, problem.message)))
    if fatal is not None and report.fatal is not None:
        fatal.append(report.fatal)
    return readers


def reconcile_gone(
    op: Operation,
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    recorded: Recorded | None = None,
) -> tuple[dict[Pair, dict[str, Outcome]], int]:
    """--resume: the intents whose resource is gone already, as done (unsent); and how
    many were checked. Only those ``recorded`` (None: all): a resource gone that no run
    of the ledger acted on is sent, to be found missing (another region, a typo)."""
    seen = look(op, groups, make_client, console, options=options, in_use=False)
    done: dict[Pair, dict[str, Outcome]] = {}
    checked = 0
    from .resume import none_listed

    for pair, found in seen.items():
        checked += len(found)
        if none_listed(pair, [s.gone for s in found.values()], console):
            if recorded is not None:
                recorded.forget(found)  # a NotFound to the call is not "done" either
            continue
        for i, s in found.items():
            if s.gone and (recorded is None or recorded.holds(i, pair)):
                done.setdefault(pair, {})[i] = Outcome(
                    Kind.SUCCEEDED,
                    ALREADY_GONE_CODE,
                    f"{observe_api(op)} lists no such {op.resource}; not sent",
                )
    return done, checked


def describe(client: Any, observe: Observe, ids: Sequence[str]) -> Mapping[str, Any]:
    """A filtered Describe call for ``ids`` (at most :data:`MAX_FILTER_VALUES`), its pages
    followed (one left unread would leave its resources as gone)."""
    request: dict[str, Any] = {
        "Filters": [{"Name": observe.filter, "Values": list(ids)}],
        **dict(observe.always),
    }
    items: list[Any] = []
    seen: set[str] = set()
    while True:
        response: Mapping[str, Any] = getattr(client, observe.method)(**request)
        items.extend(response.get(observe.key) or [])
        token = response.get("NextToken")
        if not token:
            return {**response, observe.key: items}
        if token in seen:
            raise ResponseParserError(f"{observe.api} repeated a page token")
        seen.add(token)
        request["NextToken"] = token


def observe_api(op: Operation) -> str:
    """The Describe call's API name: "DescribeSnapshots"."""
    return op.observe.api if op.observe else ""


def plan_operation(
    op: Operation,
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    params: Mapping[str, Any] | None = None,
    permission: bool = True,
) -> Plan:
    """--dry-run: each resource looked up, its outcome predicted, the permission checked
    with one DryRun call per pair (unless not ``permission``); nothing sent."""
    from .describe import InstanceInfo
    from .plan import Plan, Prediction, Row, check_plan_permission, credentials_failure

    fatal: list[Reason] = []
    unread: dict[str, str] = {}
    calls: dict[str, int] = {}
    seen = look(
        op, groups, make_client, console, options=options, unread=unread, fatal=fatal, calls=calls
    )
    rows: list[Row] = []
    for pair, ids in groups.items():
        for i in ids:
            if op.observe is None:
                rows.append(
                    Row(pair, i, None, Prediction.WOULD_ACT, f"{op.api} takes any resource ID")
                )
                continue
            s = seen.get(pair, {}).get(i)
            if s is None:
                why = unread.get(i, "could not be read")
                rows.append(Row(pair, i, None, Prediction.UNKNOWN, why))
                continue
            if s.gone:
                reason = f"{observe_api(op)} lists no such {op.resource}"
                rows.append(Row(pair, i, None, Prediction.DOES_NOT_EXIST, reason))
                continue
            info = InstanceInfo(i, s.state or "", s.type or "", s.created, s.tags, s.name)
            if s.in_use:
                rows.append(Row(pair, i, info, Prediction.WRONG_STATE, s.in_use))
            else:
                rows.append(Row(pair, i, info, Prediction.WOULD_ACT, f"{s.state} -> {op.verb}"))
    if op.observe is None:
        unchecked = (
            f"not looked up: {op.api} takes any resource ID, and no lookup is made for it; "
            "an ID that does not exist ends missing when sent"
        )
        plan = Plan(spec, rows, {}, unchecked=unchecked)
    else:
        plan = Plan(spec, rows, calls)
    plan.fatal = credentials_failure(fatal)
    if permission:
        # As for instances: one DryRun call per pair checks credentials and permission.
        check_plan_permission(
            plan, dry_run_calls(op, make_client, params), console, options=options
        )
    return plan


def dry_run_calls(
    op: Operation, make_client: MakeClient, params: Mapping[str, Any] | None
) -> Callable[[Pair], BatchCall]:
    """Each pair's ``DryRun=True`` call of ``op``: the plan's permission check."""

    return lambda pair: OperationCall(make_client(pair), op, dry_run=True, params=params)
