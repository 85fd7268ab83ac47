"""A dry run that predicts: what an action would do to each instance, and how long it takes.

EC2's own ``DryRun=True`` checks IAM permission only: it says nothing of whether
an instance exists, is in a state the action applies to, or is protected. A plan
reads those (DescribeInstances, then DescribeInstanceAttribute for the instances
that would be acted on), predicts each instance's outcome as EC2 would answer
it, checks permission once per (account, region) pair with one real DryRun call,
and estimates the run's time from EC2's documented limits for the action.
Showing a plan (a table, JSON, the ID file) is ``plan_view``'s.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .actions import ActionSpec, Bucket
from .describe import (
    MAX_DESCRIBE_BATCH,
    NOT_LISTED_CODE,
    InstanceInfo,
    classify_setup,
    describe_job,
    read_attribute_job,
    stop_if_interrupted,
)
from .ec2 import BatchCall, InstanceCall
from .report import Pair, Problem, Reason, Report
from .run import Job, RunOptions
from .states import PASSING_TO

if TYPE_CHECKING:  # the consoles are the caller's: computing a plan renders nothing
    from rich.console import Console

MakeClient = Callable[[Pair], Any]

# swarm's wall time as a multiple of the bound the buckets set: README's benchmark
# table (benchmarks/compare.py) measures 1.02-1.04x for the adaptive profile when
# round trips are short next to the refill interval, so 1.05 errs a little long.
OVERHEAD = 1.05
# The attribute that refuses each action, as DescribeInstanceAttribute names it.
PROTECTION_ATTRIBUTES = {"terminate": "disableApiTermination", "stop": "disableApiStop"}
# Codes of a DryRun answer that mean the caller may not call the action.
NOT_PERMITTED_CODES = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})


class Prediction(str, enum.Enum):
    WOULD_ACT = "would act"
    # EC2 answers these as success: stopping a stopped instance, terminating a terminated one.
    ALREADY = "already in target state"
    # EC2 answers success and does nothing ("Requests to reboot terminated instances are
    # ignored", RebootInstances' API reference); not the target state, so not ALREADY.
    IGNORED = "ignored"
    DOES_NOT_EXIST = "does not exist"
    WRONG_STATE = "wrong state"
    PROTECTED = "protected"
    NOT_PERMITTED = "not permitted"
    # The instance could not be read (credentials, an endpoint that stayed down).
    UNKNOWN = "unknown"
    # A resume by selection: a stopped run meant it, the selection made again leaves it
    # out; still there, it is recorded failed (NotSelected), never sent.
    NOT_SELECTED = "not selected"


WOULD_FAIL = frozenset(
    {
        Prediction.DOES_NOT_EXIST,
        Prediction.WRONG_STATE,
        Prediction.PROTECTED,
        Prediction.NOT_PERMITTED,
        Prediction.NOT_SELECTED,
        # Not sent: the run records it failed (Ignored), as no success says it was done.
        Prediction.IGNORED,
    }
)
# The predictions EC2 refuses inside a batch: each fails its call and splits the rest.
_REFUSED_IN_BATCH = frozenset(
    {Prediction.DOES_NOT_EXIST, Prediction.WRONG_STATE, Prediction.PROTECTED}
)

_A, _D, _I, _W = (
    Prediction.WOULD_ACT,
    Prediction.ALREADY,
    Prediction.IGNORED,
    Prediction.WRONG_STATE,
)
# What EC2 answers each action in each instance state. The refusals (IncorrectInstanceState)
# are those the sandbox reproduces in front of moto, which does not refuse them itself.
STATE_RULES: dict[str, dict[str, Prediction]] = {
    "terminate": {
        "pending": _A,
        "running": _A,
        "stopping": _A,
        "stopped": _A,
        "shutting-down": _D,
        "terminated": _D,
    },
    "stop": {
        "pending": _W,  # "cannot be stopped as it has never reached the 'running' state"
        "running": _A,
        "stopping": _D,
        "stopped": _D,
        "shutting-down": _W,
        "terminated": _W,
    },
    "start": {
        "pending": _D,
        "running": _D,
        "stopping": _W,
        "stopped": _A,
        "shutting-down": _W,
        "terminated": _W,
    },
    "reboot": {
        "pending": _A,
        "running": _A,
        "stopping": _W,
        "stopped": _W,
        # Shutting down can only end terminated, so it is ignored as a terminated one is.
        "shutting-down": _I,
        "terminated": _I,
    },
}


def _judge(
    spec: ActionSpec, info: InstanceInfo | None, protected: bool | None
) -> tuple[Prediction, str]:
    """The prediction and, for people, why."""
    if info is None:
        return Prediction.DOES_NOT_EXIST, "not in this account and region"
    rules = STATE_RULES.get(spec.name)
    if rules is None:  # an action added without rules: only its target state is known
        rules = {spec.target_state: Prediction.ALREADY} if spec.target_state else {}
        prediction = rules.get(info.state, Prediction.WOULD_ACT)
    elif info.state in rules:
        prediction = rules[info.state]
    else:
        return Prediction.UNKNOWN, f"{info.state}: a state swarm does not know"
    if prediction is Prediction.WOULD_ACT and protected:
        attribute = PROTECTION_ATTRIBUTES.get(spec.name, "protection")
        return Prediction.PROTECTED, f"{info.state}, {attribute}: OperationNotPermitted"
    if prediction is Prediction.WOULD_ACT:
        return prediction, f"{info.state} -> {spec.target_state or spec.verb}"
    if prediction is Prediction.ALREADY:
        return prediction, f"{info.state}: EC2 answers success"
    if prediction is Prediction.IGNORED:
        return prediction, f"{info.state}: EC2 answers success and does nothing (not sent)"
    passing = PASSING_TO.get(info.state)
    if passing and rules.get(passing) in (Prediction.WOULD_ACT, Prediction.ALREADY):
        # EC2 refuses it only until the instance gets there, within minutes
        return prediction, f"{info.state}: IncorrectInstanceState until it is {passing}"
    return prediction, f"{info.state}: IncorrectInstanceState"


def predict(spec: ActionSpec, info: InstanceInfo | None, protected: bool | None) -> Prediction:
    """What EC2 would answer ``spec`` for this instance.

    ``info`` None means DescribeInstances says the ID does not exist in its
    account and region; ``protected`` is the attribute that refuses the action
    (termination protection for terminate, stop protection for stop), None when
    it was not read. Permission is not the instance's: see :func:`make_plan`.
    """
    return _judge(spec, info, protected)[0]


@dataclass(frozen=True)
class Row:
    pair: Pair
    id: str
    info: InstanceInfo | None
    prediction: Prediction
    reason: str = ""


@dataclass(frozen=True)
class Permission:
    """One pair's DryRun call: ``allowed`` None when it could not say."""

    allowed: bool | None
    checked_id: str | None = None
    code: str | None = None
    message: str | None = None


@dataclass
class Plan:
    action: ActionSpec
    rows: list[Row]
    # API action -> calls the plan sent (throttled ones included): what the plan cost.
    calls: dict[str, int] = field(default_factory=dict)
    permission: dict[Pair, Permission] = field(default_factory=dict)
    protection_checked: bool = False
    # Why nothing was looked up (an operation with no Describe call): its "would act" is
    # a guess that each ID exists.
    unchecked: str | None = None
    # Why the plan's calls ended for want of valid credentials, or its DryRun call for
    # want of the action's permission: the run would end the same way, so the plan exits
    # as the run would (4), not as a prediction (1). A read the run does not make being
    # refused is no such thing: its rows are unknown.
    fatal: str | None = None
    # --missing-ok: an ID that does not exist is what the run wants (it records it
    # missing, and that counts done), not one that would fail.
    missing_ok: bool = False
    # Rows a --protect-tag rail could not check (their tags unread, or held back so by an
    # earlier run): the run sends none of them, records them RailUnverified and exits 3.
    rail_unseen: int = 0
    # Rows DescribeInstances left out of an answer with no error naming them: the run's
    # --protect-tag cannot read their tags either, and refuses them (RailUnverified).
    unlisted: set[tuple[Pair, str]] = field(default_factory=set)
    # Rows the run records without a call (a rail's, a resume's look-up, an ignored
    # reboot): they cost the run no call and no token.
    unsent: set[tuple[Pair, str]] = field(default_factory=set)

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def pairs(self) -> list[Pair]:
        return list(dict.fromkeys(r.pair for r in self.rows))

    @property
    def counts(self) -> dict[str, int]:
        """Prediction -> rows, every prediction present."""
        out = dict.fromkeys((p.value for p in Prediction), 0)
        for row in self.rows:
            out[row.prediction.value] += 1
        return out

    @property
    def would_fail(self) -> list[Row]:
        """The rows the run would record failed or missing ("already" is a success; so
        is missing, with --missing-ok)."""
        fine = {Prediction.DOES_NOT_EXIST} if self.missing_ok else set()
        return [r for r in self.rows if r.prediction in WOULD_FAIL - fine]

    @property
    def unknown(self) -> list[Row]:
        return [r for r in self.rows if r.prediction is Prediction.UNKNOWN]

    def acting_ids(self) -> dict[Pair, list[str]]:
        """The IDs that would be acted on, by pair (pairs with none left out)."""
        out: dict[Pair, list[str]] = {}
        for row in self.rows:
            if row.prediction is Prediction.WOULD_ACT:
                out.setdefault(row.pair, []).append(row.id)
        return out


def _unread(report: Report) -> dict[tuple[Pair, str], str]:
    """(pair, ID) -> why a read left it unresolved (anything but succeeded or missing)."""
    return {
        (Pair(p.account, p.region or ""), p.id): ": ".join(x for x in (p.code, p.message) if x)
        or p.status
        for p in report.problems
        if p.status not in ("succeeded", "missing")
    }


def check_permission(
    spec: ActionSpec,
    first: Mapping[Pair, str],
    make_call: Callable[[Pair], BatchCall],
    console: Console,
    *,
    options: RunOptions,
) -> tuple[dict[Pair, Permission], Report]:
    """One real ``DryRun=True`` call of the action per pair, on the ID given for it.

    EC2 answers ``DryRunOperation`` when the caller may make the call and
    ``UnauthorizedOperation`` when not. A policy that depends on the instance
    (its tags, say) may allow one instance and refuse another: one call per
    pair checks the caller's right to the action, not to every instance.
    """
    job = Job(
        spec,
        {pair: [i] for pair, i in first.items()},
        replace(
            options,
            dry_run=True,
            ledger=None,
            max_errors=None,
            batch_size=1,
            auto_batch=False,
            trace=None,
        ),
        title=f"{spec.name} (DryRun)",
    )

    from .views import run_job  # the views bring rich: only when a run is shown

    report = run_job(job, make_call, console, classify=classify_setup)
    stop_if_interrupted(report)
    problems: dict[tuple[Pair, str], Problem] = {
        (Pair(p.account, p.region or ""), p.id): p for p in report.problems
    }
    out: dict[Pair, Permission] = {}
    for pair, i in first.items():
        if i in report.done.get(pair, []):
            out[pair] = Permission(True, i, "DryRunOperation")
            continue
        problem = problems.get((pair, i))
        code = problem.code if problem else None
        message = problem.message if problem else None
        allowed = False if code in NOT_PERMITTED_CODES else None
        out[pair] = Permission(allowed, i, code, message)
    return out, report


def make_plan(
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    check_protection: bool = True,
    params: Mapping[str, Any] | None = None,
    permission: bool = True,
) -> Plan:
    """Predict what ``spec`` would do to each instance of ``groups``; change nothing.

    Three reads, each a job through a window per pair: DescribeInstances in
    batches of up to 200; DescribeInstanceAttribute (one instance a call) for
    the instances that would be acted on, for terminate and stop unless
    ``check_protection`` is False; and one ``DryRun=True`` call of the action per
    pair, on its first instance that would be acted on (unless not ``permission``: a
    caller that first marks rows a rail keeps back checks it after). ``params`` are the
    action's extra request parameters (stop's Force, Hibernate) for that call.
    """
    groups = {pair: list(dict.fromkeys(ids)) for pair, ids in groups.items() if ids}
    found, described = describe_job(
        groups, make_client, console, options=options, batch_size=MAX_DESCRIBE_BATCH
    )
    calls = {"DescribeInstances": described.total_of("calls")}
    unread = _unread(described)
    fatal = [described.fatal]

    attribute = PROTECTION_ATTRIBUTES.get(spec.name) if check_protection else None
    protected: dict[Pair, dict[str, bool]] = {}
    if attribute is not None:
        to_check = {
            pair: [
                i
                for i in ids
                if i in found[pair] and predict(spec, found[pair][i], None) is Prediction.WOULD_ACT
            ]
            for pair, ids in groups.items()
        }
        protected, checked = read_attribute_job(
            to_check, make_client, console, attribute=attribute, options=options
        )
        calls["DescribeInstanceAttribute"] = checked.total_of("calls")
        fatal.append(checked.fatal)
        gone = {
            (Pair(p.account, p.region or ""), p.id)
            for p in checked.problems
            if p.status == "missing"
        }
        for key, why in _unread(checked).items():
            unread.setdefault(key, f"{attribute} not read: {why} (--no-check-protection skips it)")
    else:
        gone = set()

    rows: list[Row] = []
    for pair, ids in groups.items():
        for i in ids:
            if (pair, i) in gone:  # vanished between the two reads
                rows.append(Row(pair, i, None, Prediction.DOES_NOT_EXIST, "no longer exists"))
                continue
            if i not in found[pair] or (pair, i) in unread:
                why = unread.get((pair, i), "could not be read")
                rows.append(Row(pair, i, found[pair].get(i), Prediction.UNKNOWN, why))
                continue
            info = found[pair][i]
            flag = protected.get(pair, {}).get(i) if attribute is not None else None
            prediction, reason = _judge(spec, info, flag)
            rows.append(Row(pair, i, info, prediction, reason))

    plan = Plan(spec, rows, calls, protection_checked=attribute is not None)
    plan.unlisted = {
        (Pair(p.account, p.region or ""), p.id)
        for p in described.problems
        if p.code == NOT_LISTED_CODE
    }
    plan.fatal = credentials_failure(fatal)
    if permission:
        check_plan_permission(
            plan,
            lambda pair: InstanceCall(make_client(pair), spec, dry_run=True, params=params),
            console,
            options=options,
        )
    return plan


def credentials_failure(reasons: Sequence[Reason | None]) -> str | None:
    """The first of ``reasons`` (why reads stopped) that the run would meet too: the
    credentials themselves (missing, expired, refused), not one read's permission."""
    return next(
        (r.text for r in reasons if r is not None and r.code not in NOT_PERMITTED_CODES), None
    )


# What a DryRun is sent on, by preference: an ID that would be acted on, else one that
# could not be read (the run would send it too).
_DRY_RUN_TARGETS = (Prediction.WOULD_ACT, Prediction.UNKNOWN)
_SENT_ANYWAY = (Prediction.WRONG_STATE, Prediction.ALREADY, Prediction.IGNORED)


def check_plan_permission(
    plan: Plan,
    make_call: Callable[[Pair], BatchCall],
    console: Console,
    *,
    options: RunOptions,
    unknown_sent: bool = True,
) -> None:
    """The permission check of :func:`check_permission` on each pair's first ID that the
    run would send (one that could not be read too, unless not ``unknown_sent``: a rail
    that cannot see keeps it back). A pair whose DryRun was refused has its rows to be sent made not
    permitted; one whose DryRun failed otherwise for good (credentials, an account not
    opted in) has them unknown, and ``plan.fatal`` says why (the run would stop there)."""
    spec = plan.action
    first: dict[Pair, str] = {}
    targets = _DRY_RUN_TARGETS if unknown_sent else _DRY_RUN_TARGETS[:1]
    # Where none would act, the run still sends those EC2 refuses or answers as done
    # (a start of instances still stopping): its permission is asked all the same.
    for wanted in (*targets, *_SENT_ANYWAY):
        for r in plan.rows:
            if r.prediction is wanted and (r.pair, r.id) not in plan.unsent:
                first.setdefault(r.pair, r.id)
    if not first:
        return
    plan.permission, dry = check_permission(spec, first, make_call, console, options=options)
    plan.calls[f"{spec.api} (DryRun)"] = dry.total_of("calls")
    refused = {p for p, perm in plan.permission.items() if perm.allowed is False}
    failed = {
        row.pair: row.fatal
        for row in dry.pairs
        if row.fatal is not None and row.pair not in refused
    }

    def judged(r: Row) -> Row:
        if r.pair in refused and r.prediction in _DRY_RUN_TARGETS:
            reason = f"{plan.permission[r.pair].code}: the DryRun call was refused"
            return replace(r, prediction=Prediction.NOT_PERMITTED, reason=reason)
        why = failed.get(r.pair)
        if why is not None and r.prediction is Prediction.WOULD_ACT:
            reason = f"the DryRun call failed: {why.text}"
            return replace(r, prediction=Prediction.UNKNOWN, reason=reason)
        return r

    plan.rows = [judged(r) for r in plan.rows]
    if plan.fatal is None and dry.fatal is not None:
        plan.fatal = dry.fatal.text


@dataclass(frozen=True)
class PairEstimate:
    pair: Pair
    ids: int  # IDs the run would send
    calls: int  # calls it would take, the splits of refused IDs included
    instance_tokens: int  # instances those calls carry (the instance bucket's cost)
    by_calls: float  # seconds the call bucket alone imposes
    by_instances: float  # seconds the instance bucket alone imposes

    @property
    def bound_seconds(self) -> float:
        return max(self.by_calls, self.by_instances)


@dataclass(frozen=True)
class Estimate:
    api: str
    calls_bucket: Bucket
    instances_bucket: Bucket | None
    batch_size: int
    overhead: float
    pairs: list[PairEstimate]

    @property
    def longest(self) -> PairEstimate | None:
        return max(self.pairs, key=lambda p: p.bound_seconds, default=None)

    @property
    def bound_seconds(self) -> float:
        """Pairs run at once, each on its own buckets: the longest pair sets the run's time."""
        longest = self.longest
        return longest.bound_seconds if longest else 0.0

    @property
    def expected_seconds(self) -> float:
        return self.bound_seconds * self.overhead


def _bucket_seconds(cost: int, bucket: Bucket | None) -> float:
    """How long a full bucket takes to pay ``cost`` tokens: the burst is free."""
    if bucket is None:
        return 0.0
    return max(0.0, cost - bucket.burst) / bucket.rate


def estimate(
    spec: ActionSpec,
    plan: Plan,
    batch_size: int,
    *,
    overhead: float = OVERHEAD,
    only_acting: bool = False,
    auto: bool = False,
) -> Estimate:
    """How long running ``spec`` would take at EC2's documented limits for it (``spec.limits``).

    ``auto`` (``--batch-size auto``): the batch starts at ``batch_size`` and grows towards
    the most IDs a call may carry while the answers allow; the quicker of the two is the
    estimate (each ID EC2 refuses costs a big call dearly, and auto stays small then).

    By default the run is the one the plan was made for: every ID in it is sent, but
    those it records without a call (``Plan.unsent``).
    ``only_acting`` estimates a run of :meth:`Plan.acting_ids` only (``--plan-out``).
    A pair whose DryRun was refused stops at its first call and costs nothing.
    An ID that EC2 refuses fails its whole call, and the rest of that call is
    sent again in two halves (``ec2.split_batch``): about two more calls, and
    the rest's instances again, per refused ID. The bound assumes full buckets
    at the start; accounts whose limits were raised run faster.
    """
    if batch_size < 1:
        raise ValueError("batch size must be at least 1")
    if auto and spec.limits.per_call != batch_size:
        sizes = (batch_size, spec.limits.per_call)
        return min(
            (estimate(spec, plan, n, overhead=overhead, only_acting=only_acting) for n in sizes),
            key=lambda e: e.bound_seconds,
        )
    limits = spec.limits
    pairs: list[PairEstimate] = []
    for pair in plan.pairs:
        if plan.permission.get(pair, Permission(None)).allowed is False:
            continue
        rows = [r for r in plan.rows if r.pair == pair and (pair, r.id) not in plan.unsent]
        if only_acting:
            rows = [r for r in rows if r.prediction is Prediction.WOULD_ACT]
        refused = sum(1 for r in rows if r.prediction in _REFUSED_IN_BATCH)
        n = len(rows)
        split = min(2, batch_size - 1) * refused
        calls = math.ceil(n / batch_size) + split
        tokens = n + min(batch_size - 1, max(0, n - 1)) * refused
        pairs.append(
            PairEstimate(
                pair,
                n,
                calls,
                tokens,
                _bucket_seconds(calls, limits.calls),
                _bucket_seconds(tokens, limits.instances),
            )
        )
    return Estimate(spec.api, limits.calls, limits.instances, batch_size, overhead, pairs)
