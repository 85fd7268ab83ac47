"""``--wait``: after an action, wait until each instance it did reaches the action's state.

The wait is a job of its own, run by the same engine as any action: one
DescribeInstances call per batch, through a window per (account, region) pair on
DescribeInstances' bucket, which is separate from the action's. An instance not
there yet is asked again after the engine's poll interval without an attempt
charged, so the wait is bounded by its deadline, not by ``max_attempts``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from rich.console import Console

from .actions import ACTIONS, DESCRIBE_LIMITS, ActionSpec
from .ec2 import (
    MISSING_CODES,
    BatchCall,
    answered_by,
    classify_exception,
    describe_instances_by_id,
)
from .engine import BEFORE_SENT, Clock
from .ledger import (
    MAYBE_DONE,
    NOT_CHECKED_CODE,
    REACHED_CODE,
    LedgerError,
    LedgerWriter,
    utc_now,
)
from .outcome import Kind, Outcome
from .report import Pair, Problem, Report
from .run import Job

WAIT_SPEC = ActionSpec(
    name="wait",
    api="DescribeInstances",
    method="describe_instances",
    verb="reached",
    limits=DESCRIBE_LIMITS,
)
# DescribeInstances has no instance bucket, so large batches cost nothing extra; 200
# keeps one answer (a few KB per instance) small enough to parse quickly.
MAX_WAIT_BATCH = 200
# Errors of an instance's Describe calls before the wait gives it up (not checked): with
# full jitter, about half a minute of them (the engine's backoff doubles to 10 s).
WAIT_ATTEMPTS = 10
TIMEOUT_CODE = "WaitTimeout"
WRONG_STATE_CODE = "WrongState"
NOT_LISTED_CODE = "NotListed"
# Once shutting down, an instance can only end up terminated.
_TERMINAL = frozenset({"shutting-down", "terminated"})


def dead_ends(target: str) -> frozenset[str]:
    """The states from which an instance can no longer reach ``target``.

    Only states that lead to nothing but termination count. A running instance
    while waiting for "stopped" (or a stopped one while waiting for "running")
    is not one: DescribeInstances is eventually consistent, so it may show the
    state from before the call for a while; the wait's deadline bounds that case.
    """
    return frozenset() if target in _TERMINAL else _TERMINAL


class Waiting(BatchCall):
    """An engine action that asks how far each resource has got towards ``target``.

    Once ``deadline`` (on ``clock``) has passed, it answers ``WaitTimeout`` for
    every ID without a call, so the engine runs out of work and the wait ends:
    run_job has no deadline of its own. :meth:`read` reports what it saw through
    :meth:`_saw` and :meth:`_reached`.
    """

    def __init__(
        self,
        client: Any,
        target: str,
        *,
        deadline: float = float("inf"),
        clock: Clock = time.monotonic,
    ) -> None:
        self.client = client
        self.target = target
        self.deadline = deadline
        self.clock = clock
        self._lock = threading.Lock()  # the engine calls from several worker threads
        self._reached_at: dict[str, str] = {}
        self._last_state: dict[str, str] = {}
        self._last_error: dict[str, Outcome] = {}  # of calls that failed, per ID asked

    @property
    def reached_at(self) -> dict[str, str]:
        """ID -> when (ISO 8601, UTC) the wait saw it reach the target."""
        with self._lock:
            return dict(self._reached_at)

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        if self.answers_unsent():
            return {i: self._timed_out(i) for i in ids}
        return super().__call__(ids)

    def answers_unsent(self) -> bool:
        """Past the deadline, what is left is answered at once, with no call: the engine
        paces none of it (at a pace a throttled Describe set, it would take minutes)."""
        return self.clock() >= self.deadline

    def failed(self, ids: Sequence[str], outcome: Outcome) -> dict[str, Outcome]:
        out = super().failed(ids, outcome)
        with self._lock:
            for i, o in out.items():
                if o.kind is not Kind.REQUEUE:
                    self._last_error[i] = o
        return out

    def _saw(self, i: str, state: str) -> None:
        with self._lock:
            self._last_state[i] = state

    def _reached(self, i: str, state: str, status: int | None, request_id: str | None) -> Outcome:
        with self._lock:
            self._reached_at.setdefault(i, utc_now())
            self._last_state[i] = state
        return Outcome(Kind.SUCCEEDED, REACHED_CODE, state, status, request_id)

    def _timed_out(self, i: str) -> Outcome:
        with self._lock:
            last = self._last_state.get(i)
            error = self._last_error.get(i)
        if last is None and error is not None:
            # Every call that asked failed (throttled, refused, an answer nobody could
            # read): not checked, with the error, not a resource seen taking its time.
            said = error.message or error.code or error.kind.value
            message = f"every call that asked failed until the wait timed out: {said}"
            return replace(error, kind=Kind.PERMANENT, message=message, maybe_acted=False)
        seen = f"last seen {last}" if last else "never seen"
        message = f"not {self.target} when the wait timed out ({seen})"
        return Outcome(Kind.PERMANENT, TIMEOUT_CODE, message)


class WaitForState(Waiting):
    """An engine action: one DescribeInstances call, and how far each instance has got."""

    def __init__(
        self,
        client: Any,
        target: str,
        *,
        deadline: float = float("inf"),
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(client, target, deadline=deadline, clock=clock)
        self._dead_ends = dead_ends(target)

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        return describe_instances_by_id(self.client, ids)

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        status, request_id = answered_by(response)
        states = {
            instance["InstanceId"]: instance["State"]["Name"]
            for reservation in response.get("Reservations", [])
            for instance in reservation.get("Instances", [])
        }
        out: dict[str, Outcome] = {}
        for i in ids:
            state = states.get(i)
            if state is None:
                out[i] = self._vanished(i, status, request_id)
                continue
            self._saw(i, state)
            if state == self.target:
                out[i] = self._reached(i, state, status, request_id)
            elif state in self._dead_ends:
                message = f"{state}: it can no longer become {self.target}"
                out[i] = Outcome(Kind.PERMANENT, WRONG_STATE_CODE, message, status, request_id)
            else:
                out[i] = Outcome(Kind.NOT_YET, state, None, status, request_id)
        return out

    def named(self, instance_id: str, outcome: Outcome) -> Outcome:
        # An ID the error names as unknown is no longer listed; the others were not
        # answered and go back.
        if outcome.kind is Kind.MISSING and outcome.code in MISSING_CODES:
            return self._vanished(instance_id, outcome.http_status, outcome.request_id)
        return outcome

    def _vanished(self, i: str, status: int | None, request_id: str | None) -> Outcome:
        # EC2 lists a terminated instance for about an hour, then forgets it.
        if self.target == "terminated":
            return self._reached(i, "terminated", status, request_id)
        message = f"no longer listed by DescribeInstances; it cannot become {self.target}"
        return Outcome(Kind.MISSING, NOT_LISTED_CODE, message, status, request_id)


@dataclass
class WaitReport(Report):
    """A wait's report; ``done`` holds the instances that reached ``target``."""

    target: str = ""
    # Instance ID -> when the wait saw it in the target state (not printed: it can be long).
    reached_at: dict[str, str] = field(default_factory=dict, repr=False)


def _classify_setup(err: Exception) -> Outcome:
    """A pair whose client cannot be made sends nothing; run_job records why."""
    try:
        return classify_exception(err)
    except Exception:  # not botocore's: as run_job itself treats set-up failures
        return Outcome(Kind.FATAL, type(err).__name__, str(err))


def wait_for(
    job: Job,
    done: Mapping[Pair, Sequence[str]],
    make_client: Callable[[Pair], Any],
    console: Console,
    *,
    timeout: float = 600.0,
) -> WaitReport:
    """Wait, all pairs at once, until the instances in ``done`` reach the job's target state.

    ``done`` is what the action run got done (its ``Report.done``). The wait
    keeps the job's window profile, attempts, call timeout and progress mode,
    writes no ledger (see :func:`record_reached`) and has no failure budget.
    Every instance ends reached (``succeeded``), ``failed`` with ``WrongState``
    or ``WaitTimeout``, ``missing``, or ``pending`` if the wait was interrupted.
    It ends within about one poll interval (the engine's, 2 s) after ``timeout``.
    """
    target = job.action.target_state
    if target is None:
        raise ValueError(f"{job.action.name} has no state to wait for")

    def make_action(client: Any, deadline: float, clock: Clock) -> Waiting:
        return WaitForState(client, target, deadline=deadline, clock=clock)

    return run_wait(
        WAIT_SPEC, target, job, done, make_action, make_client, console, timeout=timeout
    )


# A wait's engine action for one pair: (its client, the wait's deadline, the clock).
MakeWaiting = Callable[[Any, float, Clock], Waiting]


def run_wait(
    spec: ActionSpec,
    target: str,
    job: Job,
    done: Mapping[Pair, Sequence[str]],
    make_action: MakeWaiting,
    make_client: Callable[[Pair], Any],
    console: Console,
    *,
    timeout: float,
) -> WaitReport:
    """Run a wait (``spec``, one :class:`Waiting` per pair) until the IDs in ``done``
    reach ``target`` or ``timeout`` seconds pass; as :func:`wait_for` describes."""
    if job.options.dry_run:
        raise ValueError("a dry run changes nothing to wait for")
    if timeout < 0:
        raise ValueError("the wait's timeout must not be negative")
    o = job.options
    options = replace(
        o,
        ledger=None,
        max_errors=None,
        # The run's own size where it was given; else as many as one answer holds well
        # (the action's first size says how fast its bucket refills: a start's is 1).
        batch_size=min(o.batch_size, MAX_WAIT_BATCH) if not o.auto_batch else MAX_WAIT_BATCH,
        auto_batch=False,
        trace=None,
        # A Describe that fails a while (a few seconds of 5xx) is asked again: one call
        # carries every instance, and each failed call charges each of them an attempt.
        max_attempts=max(o.max_attempts, WAIT_ATTEMPTS),
    )
    groups = {pair: list(ids) for pair, ids in done.items() if ids}
    wait_job = Job(spec, groups, options, title=f"wait for {target}")
    clock: Clock = time.monotonic
    deadline = clock() + timeout  # one deadline for every pair
    actions: list[Waiting] = []

    def make(pair: Pair) -> Waiting:
        action = make_action(make_client(pair), deadline, clock)
        actions.append(action)
        return action

    from .views import run_job  # the views bring rich: only when a run is shown

    report = run_job(wait_job, make, console, classify=_classify_setup)
    reached_at: dict[str, str] = {}
    for action in actions:
        reached_at.update(action.reached_at)
    counts = report.counts
    timed_out = sum(1 for p in report.problems if p.code == TIMEOUT_CODE)
    wrong_state = sum(1 for p in report.problems if p.code == WRONG_STATE_CODE)
    # Neither reached nor seen otherwise: the Describe calls failed (denied, an endpoint
    # down), or the wait was stopped. Said with why, not left for a count that adds up short.
    unchecked = report.total - counts["succeeded"] - counts["missing"] - timed_out - wrong_state
    report.extra["wait"] = {
        "target": target,
        "timeout_seconds": timeout,
        "reached": counts["succeeded"],
        "timed_out": timed_out,
        "wrong_state": wrong_state,
        "not_listed": counts["missing"],
        "not_checked": unchecked,
        **({"not_checked_why": _why(report)} if unchecked else {}),
        # The run's own keep to the action's calls: the wait's are here.
        "outages": report.total_of("outages"),
        "timeouts": report.total_of("timeouts"),
        "gave_up": report.gave_up,
        # As the ledger records them: not seen there is pending (may or may not be done).
        "problems": [_as_recorded(p, target) for p in report.problems],
    }
    copied = {f.name: getattr(report, f.name) for f in fields(Report)}
    return WaitReport(**copied, target=target, reached_at=reached_at)


def _as_recorded(problem: Problem, target: str) -> dict[str, Any]:
    """A problem of the wait as the ledger records it (:func:`unreached`)."""
    status, code, message = unreached(problem, target)
    return {**asdict(problem), "status": status, "code": code, "message": message}


def _why(report: Report) -> str:
    """The errors that kept a wait's instances from being checked: "InternalError x 3"."""
    why = report.why(skip=(TIMEOUT_CODE, WRONG_STATE_CODE))
    return why or ("interrupted" if report.interrupted else "no answer")


def record_reached(
    ledger_path: str,
    run_id: str,
    action: str,
    report: Report,
    *,
    started: str | None = None,
    seq_after: int = 0,
) -> int:
    """Append a ``succeeded`` record with code ``Reached`` per instance the wait saw arrive,
    and a record of why for each it did not (:func:`unreached`).

    The records belong to the action's run (``run_id``, ``action``) and name each
    instance's own account and region; their seqs continue the run's after
    ``seq_after`` (its last), so no two records of the run share one. The Reached
    ones carry the run's ``started`` and merge as its own; the others carry the wait's
    own start, later, so they outrank the action's success of the same run: an instance
    the wait did not see arrive is not known done, and ``swarm ledger failed`` lists it
    and ``--resume`` looks it up. (A final action's success, terminate's, outranks them.)
    Returns how many were written; raises :class:`LedgerError` if any could not be.
    """
    spec = ACTIONS.get(action)
    target = report.target if isinstance(report, WaitReport) else None
    target = target or (spec.target_state if spec else None) or "reached"
    reached_at = report.reached_at if isinstance(report, WaitReport) else {}
    now = utc_now()
    reached = [
        (
            i,
            "succeeded",
            REACHED_CODE,
            f"{target} at {reached_at.get(i, now)}",
            reached_at.get(i, now),
            pair,
        )
        for pair, ids in report.done.items()
        for i in ids
    ]
    count = append_records(ledger_path, run_id, action, reached, started, seq_after)
    rest = [
        (p.id, *unreached(p, target), None, Pair(p.account, p.region or ""))
        for p in report.problems
    ]
    return count + append_records(ledger_path, run_id, action, rest, utc_now(), seq_after + count)


def unreached(problem: Problem, target: str) -> tuple[str, str, str]:
    """How the ledger records an instance a wait did not see reach ``target``: status,
    code and message. In another state for good (WrongState), failed; no longer listed,
    missing; not seen arrive in time or not checked, pending, ending as a call whose
    answer was lost does: the action was accepted, whether it is done nobody knows."""
    if problem.code == WRONG_STATE_CODE:
        return "failed", WRONG_STATE_CODE, problem.message or f"not {target}"
    if problem.status == "missing":
        return "missing", problem.code or NOT_LISTED_CODE, problem.message or "not listed"
    message = problem.message
    if message:
        # The engine's words for an intent it sends: here it is a look-up, whose call
        # changes nothing (only the action's own may or may not be done, said below).
        message = message.replace(BEFORE_SENT, "before it was looked up")
        if message.endswith(MAYBE_DONE):
            message = message[: -len(MAYBE_DONE)].rstrip(":; ") or None
    why = ": ".join(x for x in (problem.code, message) if x) or problem.status
    if problem.code == TIMEOUT_CODE:
        return "pending", TIMEOUT_CODE, f"--wait did not see it {target} ({why}); {MAYBE_DONE}"
    return "pending", NOT_CHECKED_CODE, f"--wait could not check it ({why}); {MAYBE_DONE}"


def append_records(
    ledger_path: str,
    run_id: str,
    action: str,
    records: Sequence[tuple[str, str, str | None, str, str | None, Pair]],
    started: str | None,
    seq_after: int,
) -> int:
    """Write (id, status, code, message, reached, pair) records of the run ``run_id``."""
    if not records:
        return 0
    writer = LedgerWriter(ledger_path, run_id, action, None, started=started, seq_after=seq_after)
    count = 0
    try:
        for i, status, code, message, when, pair in records:
            writer.write(
                i,
                status,
                code=code,
                message=message,
                reached=when,
                region=pair.region or None,
                account=pair.account,
            )
            count += 1
    finally:
        lost = writer.close()
    if writer.error is not None or lost:
        error = writer.error
        reason = (error.strerror or str(error)) if error else "records were lost"
        raise LedgerError(
            f"cannot write the ledger {ledger_path}: {reason} "
            f"({len(lost)} of {count} record(s) not written)"
        )
    return count
