"""What EC2 knows of a list of instances, read through the engine like any action.

A plan (``swarm plan``, ``--dry-run``) needs each instance's state, type, tags and
protection before it can say what an action would do. Those reads are jobs of
their own, run by :func:`run_job` with a window per (account, region) pair, so
that a list of many thousands is read as fast as the Describe buckets allow and
no faster: DescribeInstances (many IDs per call) and DescribeInstanceAttribute
(one instance per call, the only way to learn an instance's protection).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from .actions import DESCRIBE_LIMITS, ActionSpec
from .ec2 import (
    MISSING_CODES,
    BatchCall,
    answered_by,
    classify_exception,
    describe_instances_by_id,
)
from .outcome import Kind, Outcome
from .report import Pair, Report
from .run import Job, RunOptions

# DescribeInstances has no instance bucket, so a large batch costs one call token
# whatever its size; 200 keeps one answer (a few KB per instance) quick to parse.
MAX_DESCRIBE_BATCH = 200
NOT_LISTED_CODE = "NotListed"
# An ID a look-up with a patience gave up on: no answer read anything for that long
# (DescribeInstances throttled, failing or hung all that while).
LATE_CODE = "LookUpTimedOut"
# The errors whose message names the IDs at fault; the rest of the batch is asked again.
BAD_ID_CODES = MISSING_CODES | {"InvalidInstanceID.Malformed"}
# DescribeInstanceAttribute's attribute names and the key its answer holds each under.
ATTRIBUTES = {
    "disableApiTermination": "DisableApiTermination",
    "disableApiStop": "DisableApiStop",
}

DESCRIBE_SPEC = ActionSpec(
    name="describe",
    api="DescribeInstances",
    method="describe_instances",
    verb="described",
    limits=DESCRIBE_LIMITS,
)
# EC2 keeps DescribeInstanceAttribute among the Describe* actions, on their limits.
ATTRIBUTE_SPEC = ActionSpec(
    name="describe-attribute",
    api="DescribeInstanceAttribute",
    method="describe_instance_attribute",
    verb="read",
    limits=DESCRIBE_LIMITS,
)

MakeClient = Callable[[Pair], Any]


class ReadInterrupted(KeyboardInterrupt):
    """A signal stopped a read made before anything is sent (a plan, a rail, a sample).

    What was read is incomplete, so nothing may be decided on it: the command stops,
    with nothing sent. ``signal`` is the signal's name (``SIGINT``).
    """

    def __init__(self, signal: str) -> None:
        super().__init__(signal)
        self.signal = signal


def stop_if_interrupted(report: Report) -> None:
    """Raise :class:`ReadInterrupted` when a signal cut the read ``report`` tells of short."""
    if report.signal is not None:
        raise ReadInterrupted(report.signal)


@dataclass(frozen=True)
class InstanceInfo:
    """One instance as DescribeInstances showed it."""

    id: str
    state: str
    type: str
    launch_time: datetime | None
    tags: dict[str, str]
    name: str | None  # the Name tag
    # When a user's call stopped it, as EC2's StateTransitionReason says ("User
    # initiated (2026-12-06 10:00:00 GMT)"), to the second; None when it does not say.
    stopped_at: datetime | None = None

    @classmethod
    def of(cls, instance: Mapping[str, Any]) -> InstanceInfo:
        """From one item of DescribeInstances' ``Reservations[].Instances[]``."""
        tags = {t["Key"]: t.get("Value", "") for t in instance.get("Tags") or []}
        launched = instance.get("LaunchTime")
        return cls(
            id=instance["InstanceId"],
            state=instance.get("State", {}).get("Name", "unknown"),
            type=instance.get("InstanceType", ""),
            launch_time=launched if isinstance(launched, datetime) else None,
            tags=tags,
            name=tags.get("Name"),
            stopped_at=_user_initiated(instance.get("StateTransitionReason")),
        )


_USER_INITIATED = re.compile(
    r"User initiated \((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)", re.ASCII
)


def _user_initiated(reason: object) -> datetime | None:
    match = _USER_INITIATED.search(reason) if isinstance(reason, str) else None
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)


def classify_setup(err: Exception) -> Outcome:
    """Why a pair's client could not be made; run_job records it for that pair's IDs."""
    try:
        return classify_exception(err)
    except Exception:  # not botocore's: as run_job itself treats set-up failures
        return Outcome(Kind.FATAL, type(err).__name__, str(err))


def _missing(instance_id: str, outcome: Outcome) -> Outcome:
    """An ID that DescribeInstances names as unknown or malformed is missing."""
    return replace(outcome, kind=Kind.MISSING)


class DescribeBatch(BatchCall):
    """An engine action: one DescribeInstances call for a batch of IDs.

    Each listed instance succeeds and is kept in :attr:`found`; an ID EC2 does
    not list, or names as unknown or malformed, is missing. The others of a
    batch with such an ID were not answered; they go back to be asked in halves
    (see :func:`~swarm_cli.ec2.split_batch`), so a batch with several bad IDs
    costs a few calls, not one per ID.
    """

    changes = False

    split_codes = BAD_ID_CODES

    def __init__(
        self,
        client: Any,
        *,
        patience: float = math.inf,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.patience = patience
        self.clock = clock
        self._lock = threading.Lock()  # the engine calls from several worker threads
        self._found: dict[str, InstanceInfo] = {}
        self._read_at = clock()  # when an answer last read instances (or the start)

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        if self.answers_unsent():
            late = Outcome(
                Kind.PERMANENT,
                LATE_CODE,
                f"no answer read an instance for {self.patience:g}s: the look-up gave up",
            )
            return dict.fromkeys(ids, late)
        return super().__call__(ids)

    def answers_unsent(self) -> bool:
        """Once no answer has read anything for ``patience`` seconds (Describe throttled,
        failing or hung all that while), what is left is answered at once, with no call:
        the engine paces none of it (behind throttles, that would take minutes)."""
        with self._lock:
            return self.clock() - self._read_at >= self.patience

    @property
    def found(self) -> dict[str, InstanceInfo]:
        with self._lock:
            return dict(self._found)

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        return describe_instances_by_id(self.client, ids)

    def named(self, instance_id: str, outcome: Outcome) -> Outcome:
        return _missing(instance_id, outcome)

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        status, request_id = answered_by(response)
        listed = {
            info.id: info
            for reservation in response.get("Reservations", [])
            for info in map(InstanceInfo.of, reservation.get("Instances", []))
        }
        with self._lock:
            self._found.update(listed)
            self._read_at = self.clock()
        found = Outcome(Kind.SUCCEEDED, None, None, status, request_id)
        gone = Outcome(
            Kind.MISSING, NOT_LISTED_CODE, "not listed by DescribeInstances", status, request_id
        )
        return {i: found if i in listed else gone for i in ids}


class AttributeCheck(BatchCall):
    """An engine action: DescribeInstanceAttribute for one instance, kept in :attr:`values`.

    EC2 answers for one instance per call, so the engine must send batches of
    one; a larger batch is sent back to travel alone rather than cost several
    calls inside one engine call, which the window could not see.
    """

    changes = False

    split_codes = BAD_ID_CODES

    def __init__(self, client: Any, attribute: str) -> None:
        if attribute not in ATTRIBUTES:
            raise ValueError(f"no such instance attribute {attribute!r}; known: {list(ATTRIBUTES)}")
        self.client = client
        self.attribute = attribute
        self._key = ATTRIBUTES[attribute]
        self._lock = threading.Lock()
        self._values: dict[str, bool] = {}

    @property
    def values(self) -> dict[str, bool]:
        """Instance ID -> the attribute's value."""
        with self._lock:
            return dict(self._values)

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        if len(ids) != 1:
            alone = Outcome(Kind.REQUEUE, "OneAtATime", "one instance per call", batch_limit=1)
            return dict.fromkeys(ids, alone)
        return super().__call__(ids)

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        response: Mapping[str, Any] = self.client.describe_instance_attribute(
            InstanceId=ids[0], Attribute=self.attribute
        )
        return response

    def named(self, instance_id: str, outcome: Outcome) -> Outcome:
        return _missing(instance_id, outcome)

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        (instance_id,) = ids
        value = bool(response.get(self._key, {}).get("Value", False))
        with self._lock:
            self._values[instance_id] = value
        return {instance_id: Outcome(Kind.SUCCEEDED, None, None, *answered_by(response))}


# The least a read of up to 200 IDs is waited for: its answer slows with its size and
# with the calls beside it (0.7 s to 2 s and more), and a call taken for lost makes the
# look-up probe an outage that is not there. A hung endpoint is still seen in seconds.
READ_MIN_TIMEOUT = 10.0


def read_options(options: RunOptions, batch_size: int) -> RunOptions:
    """A run's options for a look-up: reads change nothing (no ledger, no failure budget,
    never a dry run), in calls of ``batch_size``, each waited for at least
    :data:`READ_MIN_TIMEOUT`."""
    return replace(
        options,
        dry_run=False,
        ledger=None,
        max_errors=None,
        batch_size=batch_size,
        auto_batch=False,
        trace=None,
        min_timeout=max(options.min_timeout, READ_MIN_TIMEOUT),
    )


def describe_job(
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    batch_size: int = MAX_DESCRIBE_BATCH,
    patience: float = math.inf,
) -> tuple[dict[Pair, dict[str, InstanceInfo | None]], Report]:
    """As :func:`describe`, with the run's report (its calls, and why an ID is absent).
    A pair whose answers read nothing for ``patience`` seconds gives the rest up
    (``LookUpTimedOut``)."""
    if not 1 <= batch_size <= MAX_DESCRIBE_BATCH:
        raise ValueError(f"a DescribeInstances batch holds 1 to {MAX_DESCRIBE_BATCH} IDs")
    actions: dict[Pair, DescribeBatch] = {}

    def make_action(pair: Pair) -> DescribeBatch:
        actions[pair] = DescribeBatch(make_client(pair), patience=patience)
        return actions[pair]

    groups = {pair: list(ids) for pair, ids in groups.items() if ids}
    job = Job(DESCRIBE_SPEC, groups, read_options(options, batch_size), title="DescribeInstances")
    from .views import run_job  # the views bring rich: only when a run is shown

    report = run_job(job, make_action, console, classify=classify_setup)
    stop_if_interrupted(report)
    missing = {(p.region, p.account, p.id) for p in report.problems if p.status == "missing"}
    out: dict[Pair, dict[str, InstanceInfo | None]] = {}
    for pair, ids in groups.items():
        found = actions[pair].found if pair in actions else {}
        known: dict[str, InstanceInfo | None] = {}
        for i in ids:
            if i in found:
                known[i] = found[i]
            elif (pair.region, pair.account, i) in missing:
                known[i] = None
        out[pair] = known
    return out, report


def describe(
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    batch_size: int = MAX_DESCRIBE_BATCH,
) -> dict[Pair, dict[str, InstanceInfo | None]]:
    """Every pair's instances, all pairs at once, each through a window on its own bucket.

    An ID maps to its :class:`InstanceInfo`, or to None when EC2 says it does
    not exist in that account and region. An ID that could not be read at all
    (credentials, permission, an endpoint that stayed down) is left out, so
    that "does not exist" is never said of an instance nobody could ask about.
    The options' window, attempts, timeouts and progress are kept; there is no
    ledger.
    """
    found, _ = describe_job(groups, make_client, console, options=options, batch_size=batch_size)
    return found


def read_attribute_job(
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    attribute: str,
    options: RunOptions,
) -> tuple[dict[Pair, dict[str, bool]], Report]:
    """As :func:`read_attribute`, with the run's report."""
    if attribute not in ATTRIBUTES:
        raise ValueError(f"no such instance attribute {attribute!r}; known: {list(ATTRIBUTES)}")
    actions: dict[Pair, AttributeCheck] = {}

    def make_action(pair: Pair) -> AttributeCheck:
        actions[pair] = AttributeCheck(make_client(pair), attribute)
        return actions[pair]

    groups = {pair: list(ids) for pair, ids in groups.items() if ids}
    job = Job(
        ATTRIBUTE_SPEC,
        groups,
        read_options(options, 1),
        title=f"DescribeInstanceAttribute ({attribute})",
    )
    from .views import run_job

    report = run_job(job, make_action, console, classify=classify_setup)
    stop_if_interrupted(report)
    return {pair: (actions[pair].values if pair in actions else {}) for pair in groups}, report


def read_attribute(
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    attribute: str,
    options: RunOptions,
) -> dict[Pair, dict[str, bool]]:
    """``disableApiTermination`` or ``disableApiStop`` of each instance, one call each.

    An instance whose attribute could not be read (it vanished, or the call
    failed) is left out.
    """
    values, _ = read_attribute_job(
        groups, make_client, console, attribute=attribute, options=options
    )
    return values
