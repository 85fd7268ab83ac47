"""After a run: undo it when its failure budget is spent (``--rollback``), wait for the
instances to reach their state or an operation's resources to be gone (``--wait``), the
step summary and the HTML report."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..actions import ACTIONS, ActionSpec
from ..actions.operations import RESOURCE_OPERATIONS, Operation
from ..batching import initial_size
from ..errors import EXIT_FAILED, EXIT_LEDGER, EXIT_REFUSED, EXIT_SIGNALLED, UsageError
from ..ledger import (
    FINAL_SUCCESS,
    MAYBE_DONE,
    NOT_CHECKED_CODE,
    LedgerError,
    utc_now,
)
from ..outcome import Outcome
from ..report import Pair, Problem, Report, parse_ts
from ..run import Job, RunOptions
from ..states import INCORRECT_STATE, ON_ITS_WAY_TO, PASSING_TO, REFUSED_ON_THE_WAY
from ..text import literal, shell_quote
from ..views import run_job
from .exits import error, warn
from .guards import unverified_count
from .options import Flags
from .reach import Reach

if TYPE_CHECKING:
    from ..describe import InstanceInfo
    from ..saga import UndoPlan


def follow_up(
    spec: ActionSpec, flags: Flags, job: Job, report: Report, reach: Reach, err: Console
) -> None:
    """After the run: undo it when --rollback and its failure budget is spent; then --wait
    (for an operation of the registry: until what it did is gone).

    Neither starts after a signal (a runner that sent it kills soon after) or when the
    ledger could not be written (neither could their records).
    """
    if report.interrupted or report.ledger_error:
        passed_by = " and ".join(
            o for o, given in (("--rollback", flags.rollback), ("--wait", flags.wait)) if given
        )
        if passed_by:
            err.print(f"{passed_by} skipped: the run was stopped short", markup=False)
        if flags.wait and not report.ledger_error:
            why = f"the run was stopped by {report.signal or 'a signal'} before its --wait"
            _not_waited_for(spec, flags, job, report, err, report.done, why)
        return
    if flags.rollback and report.budget_spent is not None:
        from ..describe import ReadInterrupted
        from ..saga import SagaError, undo_plan, undo_report

        try:
            # From the ledger when there is one: what is on disk is what was done.
            ledger = job.options.ledger
            if ledger:
                plan = undo_plan([ledger], report.run, allow_empty=True)
            else:
                plan = undo_report(report)
        except (SagaError, LedgerError) as exc:
            err.print(f"rollback: {literal(exc)}", markup=False)
        else:
            # Calls still unanswered when the budget stopped the run may have been done.
            groups, unread = reconcile_undo(plan, reach, job.options, err)
            if unread:
                warn(
                    err,
                    f"rollback: {unread}; they are not undone: `swarm rollback LEDGER --run "
                    f"{plan.run}` once they can be read",
                )
            count = sum(len(ids) for ids in groups.values())
            if not count and not unread:
                err.print(f"rollback: run {plan.run} changed nothing: nothing to undo")
            else:
                err.print(
                    f"rollback: the failure budget is spent; {plan.action.name} the "
                    f"{count} instance(s) this run {spec.verb}"
                )
                # The undo has no budget of its own: one that stopped it early would leave
                # more of the run in place.
                options = replace(job.options, max_errors=None)
                if options.auto_batch:  # from where the undo's own bursts are spent together
                    options = replace(options, batch_size=initial_size(plan.action.limits))
                try:
                    settle(plan, groups, reach, options, err, flags.wait_timeout)
                except ReadInterrupted as exc:
                    # Nothing undone: the run's state stays, and the way back is the undo.
                    report.signal = report.signal or exc.signal
                    report.exit_code = EXIT_SIGNALLED + signal.Signals[exc.signal].value
                    back = (
                        f"swarm rollback {shell_quote(ledger)} --run {plan.run}"
                        if ledger
                        else "the run wrote no ledger to undo it from"
                    )
                    report.extra["rollback_stopped"] = {"signal": exc.signal, "undo": back}
                    err.print(
                        f"rollback: stopped by {exc.signal} before anything was undone: {back}",
                        markup=False,
                    )
                    return
                undo = run_plan(
                    plan.action,
                    groups,
                    options,
                    reach,
                    err,
                    "rollback",
                    wait=flags.wait,
                    undoes=plan.runs,
                )
                report.undone = frozenset(i for ids in undo.done.values() for i in ids)
                # The undo's own after-run (what it found on its way; with --wait, its
                # instances waited for until they are back), as `swarm rollback` has.
                undoing = Job(plan.action, groups, options)
                follow_up(plan.action, replace(flags, rollback=False), undoing, undo, reach, err)
                report.extra["rollback"] = undo.to_dict()
                if ledger:
                    # Cut short (a signal), refused in part or not seen through by its wait:
                    # the way to finish the undo, rather than a resume of the run, which
                    # would act again on what it undid: as `swarm rollback` names it, with
                    # the run's options (where it acted, its rails, its wait).
                    from .act import finish_rollback

                    # Only what `swarm rollback` takes: the ledger names the regions, and
                    # the run's own tuning and budget are not the undo's.
                    undo_flags = replace(
                        flags,
                        rollback=False,
                        max_errors=None,
                        region=None,
                        params={},
                        options=replace(
                            flags.options,
                            auto_batch=True,
                            headroom=0.0,
                            missing_ok=False,
                            max_outage=RunOptions().max_outage,
                        ),
                    )
                    finish = finish_rollback(plan.action, undo, ledger, plan.runs, undo_flags)
                    if finish:
                        report.extra["rollback"]["finish"] = finish
                report.signal = report.signal or undo.signal  # the command was stopped
                if undo.exit_code:
                    report.exit_code = undo.exit_code
    operation = RESOURCE_OPERATIONS.get(spec.name)
    if operation is None and not flags.dry_run and "rollback" not in report.extra:
        from ..describe import ReadInterrupted

        try:
            on_their_way(spec, job, report, reach, err)
        except ReadInterrupted as exc:
            # A signal during the look-up: the refusals stay as EC2 answered them, and
            # the command stops there, as it would have in the run (no --wait after it).
            report.signal = report.signal or exc.signal
            report.exit_code = EXIT_SIGNALLED + signal.Signals[exc.signal].value
            return
        except LedgerError as exc:
            error(err, f"{exc}")
            report.ledger_error = str(exc)
            report.exit_code = EXIT_LEDGER
            return
    if flags.wait and "rollback" in report.extra:
        # What the run did was undone: nothing of it is to reach the run's state (the
        # undo's own wait, for its state, is in the rollback's report).
        _rolled_back(spec, flags, job, report, err)
        return
    if flags.wait and not flags.dry_run and report.done:
        from ..wait import WaitReport, record_reached, wait_for

        waited: WaitReport
        # A pair whose credentials failed sends nothing more with them (a helper that
        # hung would hang the wait's calls too): what it did is recorded not checked.
        lost = _credentials_lost(report)
        skipped = {p: ids for p, ids in report.done.items() if p in lost and ids}
        if skipped:
            why = (
                "the run stopped on its credentials ("
                + ", ".join(sorted({lost[p] for p in skipped}))
                + ") before its --wait"
            )
            err.print(
                f"--wait skipped in {', '.join(sorted(p.label for p in skipped))}: {why}",
                markup=False,
            )
            if not _not_waited_for(spec, flags, job, report, err, skipped, why):
                return
            if all(p in lost for p in report.done):
                return
        waiting = {p: ids for p, ids in report.done.items() if p not in skipped}
        done = sum(len(ids) for ids in waiting.values())
        if done and not flags.quiet and job.options.progress != "none":
            # What the calls did, before a wait that may be long (or cut short by a kill).
            target = spec.target_state if operation is None else operation.verb
            err.print(
                f"{spec.name}: {done} of {report.total} succeeded in "
                f"{report.elapsed_seconds:.1f}s; --wait: until they are {target} (at most "
                f"{flags.wait_timeout:g}s)",
                markup=False,
            )
        if operation is not None and operation.observe is not None:
            from ..wait_gone import wait_gone

            waited = wait_gone(
                operation, job, waiting, reach.client, err, timeout=flags.wait_timeout
            )
        elif operation is None and spec.target_state:
            waited = wait_for(job, waiting, reach.client, err, timeout=flags.wait_timeout)
        else:
            return
        report.extra["wait"] = _with_skipped(waited.extra.get("wait", {}), report, skipped)
        if job.options.ledger:
            try:
                record_reached(
                    job.options.ledger,
                    report.run,
                    spec.name,
                    waited,
                    started=report.ledger_started,
                    seq_after=report.ledger_seq,
                )
            except LedgerError as exc:
                error(err, f"--wait: {exc}")
                report.ledger_error = str(exc)
                report.exit_code = EXIT_LEDGER
                return
        report.signal = report.signal or waited.signal  # the command was stopped
        if waited.exit_code and (not report.exit_code or waited.signal):
            report.exit_code = waited.exit_code


def checked_by_wait(name: str) -> bool:
    """Whether what an action did is known done only once a --wait saw it: a resume can
    look it up (a reboot leaves no state that says it was done), and its success is not
    final (a terminate's and a deletion's are)."""
    from ..states import observable

    return observable(name) and name not in FINAL_SUCCESS


def _rolled_back(spec: ActionSpec, flags: Flags, job: Job, report: Report, err: Console) -> None:
    """A --wait run undone by its --rollback: its wait is not to come, and its records
    say it was to (``waits``). The successes the undo left (nothing to undo, or the undo
    refused) are recorded again without it, in the run, so that they do not read as a
    wait cut short; one undone reads so by the undo's own records, which are later."""
    from ..wait import append_records

    ledger = job.options.ledger
    if flags.dry_run or not checked_by_wait(spec.name) or not ledger or not report.done:
        return
    if report.signal:
        return  # the undo was stopped short: what it did not reach stays not known done
    message = "the run was rolled back: its --wait did not run"
    # Not one the undo did: its success stays older than the undo's, which outranks it.
    records = [
        (i, "succeeded", None, message, None, pair)
        for pair, ids in report.done.items()
        for i in ids
        if i not in report.undone
    ]
    try:
        append_records(
            ledger, report.run, spec.name, records, report.ledger_started, report.ledger_seq
        )
    except LedgerError as exc:
        error(err, f"--wait: {exc}")
        report.ledger_error = str(exc)
        report.exit_code = EXIT_LEDGER


def _credentials_lost(report: Report) -> dict[Pair, str]:
    """The pairs whose run stopped on its credentials (missing, expired, a helper that
    failed or hung), not on one call's permission: the code of each."""
    from ..plan import credentials_failure

    return {
        Pair(p.account, p.region): p.fatal.code or "fatal"
        for p in report.pairs
        if p.fatal is not None and credentials_failure([p.fatal])
    }


def _with_skipped(
    wait: dict[str, Any], report: Report, skipped: Mapping[Pair, Sequence[str]]
) -> dict[str, Any]:
    """A wait's summary with the pairs it skipped counted not checked, as recorded."""
    if not skipped:
        return wait
    extra = report.extra.get("wait", {})
    whys = [w for w in (extra.get("not_checked_why"), wait.get("not_checked_why")) if w]
    return {
        **wait,
        "not_checked": wait.get("not_checked", 0) + extra.get("not_checked", 0),
        "not_checked_why": "; ".join(whys) or None,
        "problems": [*extra.get("problems", ()), *wait.get("problems", ())],
    }


def _not_waited_for(
    spec: ActionSpec,
    flags: Flags,
    job: Job,
    report: Report,
    err: Console,
    done: Mapping[Pair, Sequence[str]],
    why: str,
) -> bool:
    """A --wait run stopped before its wait (``why``): what it did (``done``) is
    recorded not known there (``pending``, NotChecked), as a wait stopped midway records
    it, so that `swarm ledger failed` lists it and a --resume --wait looks it up (its
    success alone would pass the gate with instances still stopping, or started again
    since). False when the ledger could not be written."""
    from ..states import observable
    from ..wait import append_records

    ledger = job.options.ledger
    count = sum(len(ids) for ids in done.values())
    if not flags.dry_run and count and observable(spec.name) and spec.name in FINAL_SUCCESS:
        # A terminate accepted stands done, and nothing is recorded against it; a resume
        # with --wait looks such ones up and waits for them (a deletion's does not).
        err.print(
            f"--wait: the {count} it {spec.verb} stand done in the ledger (EC2 does not take "
            "a terminate back); the same command with --resume looks them up and waits for them",
            markup=False,
        )
    # Only where a resume can look it up (a reboot leaves no state that says it was done,
    # and one not known done would be sent again), and not a final success (terminate's,
    # a deletion's: it outranks a wait's records, and the reports must not count it).
    if flags.dry_run or not checked_by_wait(spec.name) or not ledger or not done:
        return True
    message = f"--wait could not check it ({why}); {MAYBE_DONE}"
    records = [
        (i, "pending", NOT_CHECKED_CODE, message, None, pair)
        for pair, ids in done.items()
        for i in ids
    ]
    try:
        # Started after the run: they outrank its successes, as a wait's records do.
        report.ledger_seq += append_records(
            ledger, report.run, spec.name, records, utc_now(), report.ledger_seq
        )
    except LedgerError as exc:
        error(err, f"--wait: {exc}")
        report.ledger_error = str(exc)
        report.exit_code = EXIT_LEDGER
        return False
    err.print(
        f"--wait: the {len(records)} it {spec.verb} are recorded not seen there (NotChecked): "
        "`swarm ledger failed` lists them, and a --resume --wait looks them up",
        markup=False,
    )
    # The summary and the reports count them as a wait stopped midway would, in the
    # shape a wait's own summary has.
    report.extra["wait"] = {
        "target": spec.target_state,
        "timeout_seconds": flags.wait_timeout,
        "reached": 0,
        "timed_out": 0,
        "wrong_state": 0,
        "not_listed": 0,
        "not_checked": len(records),
        "not_checked_why": why,
        "outages": 0,
        "gave_up": False,
        "problems": [
            asdict(Problem(i, status, code, message, pair.region or None, pair.account))
            for i, status, code, message, _, pair in records
        ],
    }
    return True


def settle(
    plan: UndoPlan,
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    err: Console,
    timeout: float,
) -> None:
    """Before an undo: waits, up to ``timeout`` seconds, until the run's instances still on
    their way to its state are there (an undo right after a stop would find them stopping,
    and EC2 starts none of those). Those that do not get there are undone all the same,
    and fail as EC2 answers. A signal raises ``ReadInterrupted``: nothing was undone."""
    from ..describe import describe, stop_if_interrupted
    from ..wait import wait_for

    spec = ACTIONS[plan.of]
    passing = ON_ITS_WAY_TO.get(spec.target_state or "")
    if passing is None or options.dry_run:
        return
    seen = describe(groups, reach.client, err, options=options)
    moving = {
        pair: [i for i, info in known.items() if info is not None and info.state == passing]
        for pair, known in seen.items()
    }
    moving = {pair: ids for pair, ids in moving.items() if ids}
    count = sum(map(len, moving.values()))
    if not count:
        return
    err.print(
        f"rollback: {count} instance(s) still {passing}: waiting up to {timeout:g} s until "
        f"they are {spec.target_state} (EC2 refuses to {plan.action.name} them before)",
        markup=False,
    )
    waited = wait_for(Job(spec, moving, options), moving, reach.client, err, timeout=timeout)
    stop_if_interrupted(waited)
    late = count - waited.counts["succeeded"]
    if late:
        warn(
            err,
            f"rollback: {late} of them not {spec.target_state} after {timeout:g} s "
            f"(--wait-timeout): {plan.action.name} them all the same; EC2 refuses those still "
            f"{passing} (IncorrectInstanceState), to be undone again once they are there",
        )


def on_their_way(spec: ActionSpec, job: Job, report: Report, reach: Reach, err: Console) -> None:
    """The instances EC2 refused as in the wrong state that are only on their way (a start
    right after a stop finds them stopping) are no failure for good: looked up, and
    recorded so (``InTransition``, which ``swarm ledger failed --retryable`` keeps). A
    signal during the look-up raises ``ReadInterrupted``."""
    from ..describe import describe
    from ..ledger import IN_TRANSITION_CODE
    from ..wait import append_records

    passing = REFUSED_ON_THE_WAY.get(spec.name)
    refused = [p for p in report.problems if p.status == "failed" and p.code == INCORRECT_STATE]
    if passing is None or not refused or report.interrupted:
        return
    groups: dict[Pair, list[str]] = {}
    for p in refused:
        groups.setdefault(Pair(p.account, p.region or ""), []).append(p.id)
    # A signal meanwhile raises ReadInterrupted: nothing looked up is recorded.
    seen = describe(groups, reach.client, err, options=replace(job.options, progress="none"))
    target = PASSING_TO[passing]
    # Still on its way, or there by now (a long run looks up its first refusals late).
    moving = {
        (pair, i)
        for pair, known in seen.items()
        for i, info in known.items()
        if info is not None and info.state in (passing, target)
    }
    if not moving:
        return
    message = (
        f"{passing} when sent (IncorrectInstanceState): EC2 refused it; it can be "
        f"{spec.verb} once it is {target} (a retry then)"
    )
    if job.options.ledger:
        records = [
            (i, "failed", IN_TRANSITION_CODE, message, None, pair)
            for pair, i in sorted(moving, key=lambda m: m[1])
        ]
        report.ledger_seq += append_records(
            job.options.ledger,
            report.run,
            spec.name,
            records,
            report.ledger_started,
            report.ledger_seq,
        )
    ids = {i for _, i in moving}
    report.problems = [
        replace(p, code=IN_TRANSITION_CODE, message=message) if p in refused and p.id in ids else p
        for p in report.problems
    ]


def refuse_wait(operation: Operation, flags: Flags) -> None:
    """--wait for an operation that no Describe call shows done: refused before anything
    is sent, there is nothing to wait for."""
    if flags.wait and operation.observe is None:
        raise UsageError(
            f"--wait: nothing to wait for: {operation.api} is done when it answers and no "
            f"Describe call shows a {operation.resource} {operation.verb}"
        )


def run_plan(
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    options: RunOptions,
    reach: Reach,
    err: Console,
    title: str,
    settled: Mapping[Pair, Mapping[str, Outcome]] | None = None,
    *,
    wait: bool = False,
    undoes: Sequence[str] = (),
) -> Report:
    """Runs ``spec`` on ``groups``, the undo of the runs ``undoes``, said on its intents;
    with ``wait``, a --wait is to follow it."""
    from ..ec2 import InstanceCall, classify_exception

    def action(pair: Pair) -> InstanceCall:
        return InstanceCall(reach.client(pair), spec, dry_run=options.dry_run)

    waits = spec.target_state if wait and checked_by_wait(spec.name) else None
    ids = {p: list(i) for p, i in groups.items()}
    job = Job(spec, ids, options, title, settled or {}, waits=waits, undoes=tuple(undoes))
    report = run_job(job, action, err, classify=classify_exception)
    unverified = unverified_count(settled or {})
    if unverified:
        report.extra["rail_unverified"] = unverified
        if report.exit_code in (0, EXIT_FAILED):  # a rail that could not see refused them
            report.exit_code = EXIT_REFUSED
    return report


def reconcile_undo(
    plan: UndoPlan, reach: Reach, options: RunOptions, err: Console
) -> tuple[dict[Pair, list[str]], str | None]:
    """What to undo: the run's successes, and those of its pending intents EC2 shows done;
    and, when some pending intents could not be looked up, what to tell of them.

    A call in flight when the run was killed may have been carried out though
    the ledger says pending; DescribeInstances tells (in batches, through a
    window). Those in the run's end state are undone with the rest. Those it
    could not read are neither: whether they were carried out is unknown.
    """
    from ..resume import reconcile
    from ..states import done_words

    groups = {p: list(ids) for p, ids in plan.groups.items()}
    count = sum(len(ids) for ids in plan.unsure.values())
    if not count:
        return groups, None
    seen = reconcile(plan.of, plan.unsure, reach.client, err, options=options)
    earlier = _stopped_before(plan, seen.found)
    for pair, done in seen.done.items():
        groups.setdefault(pair, []).extend(i for i in done if i not in earlier)
    verb = done_words(plan.of)
    read = count - seen.unread
    already = seen.already - len(earlier)
    err.print(
        f"rollback: {count} intent(s) of the run were left pending; "
        + (
            f"DescribeInstances shows {already or 'none'} of the {read} it could read {verb}"
            + (
                f" since the run began ({len(earlier)} stopped before it, as EC2 says: left alone)"
                if earlier
                else ""
            )
            + (": they are undone too" if already else ": nothing more to undo")
            if read
            else "DescribeInstances could read none of them"
        ),
        markup=False,
    )
    if not seen.unread:
        return groups, None
    return groups, (
        f"{seen.unread} pending intent(s) of run {plan.run} could not be looked up "
        f"({seen.why or 'no answer'}): whether they were {verb} is unknown"
    )


# How much earlier than the run EC2's time of a stop must be to count as before it: the
# run's start is this machine's clock, the stop's EC2's, and AWS refuses a signed request
# from a clock more than 5 minutes off; a stop within this of the run is undone as ever.
CLOCKS_APART = timedelta(minutes=6)


def _stopped_before(plan: UndoPlan, found: Mapping[str, InstanceInfo]) -> set[str]:
    """The unsure instances of a stop run that a user's call stopped before the run began,
    as DescribeInstances' StateTransitionReason tells: not the run's doing, not undone."""
    began = parse_ts(plan.began)
    if plan.of != "stop" or began is None:
        return set()
    return {
        i
        for ids in plan.unsure.values()
        for i in ids
        if (info := found.get(i)) is not None
        and info.state == "stopped"
        and info.stopped_at is not None
        and info.stopped_at < began - CLOCKS_APART
    }


def save_report(report: Report, path: str, err: Console) -> None:
    """--report: one self-contained HTML page of the run; failing to write it loses nothing."""
    from ..html_report import write_html

    try:
        write_html(report, path)
    except OSError as exc:
        warn(err, f"could not write the report {path}: {exc.strerror or exc}")
    else:
        err.print(f"report: {literal(path)}", markup=False)


def step_summary(report: Report, err: Console) -> None:
    """In a GitHub Actions job, the run's summary on the job's page too."""

    from ..summary_md import append_step_summary

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    why: list[str] = []
    if path and append_step_summary(report, why=why) is None:
        warn(err, f"could not append the summary to {path}" + (f": {why[0]}" if why else ""))
