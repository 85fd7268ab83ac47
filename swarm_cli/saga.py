"""A run as a saga: a failure budget (``--max-errors``) and compensation from the ledger.

Stop and start undo each other, so a run of either can be compensated by running
the other on what it got done. Terminate (and reboot) cannot be undone: for
them the budget only stops the run early.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .actions import ACTIONS, ActionSpec
from .ledger import (
    ALREADY_CODE,
    REACHED_CODE,
    STATUS_RANK,
    WAS_ALREADY_CODE,
    Damaged,
    Record,
    WriteAheadCheck,
    describe_damage,
    may_have_acted,
    read_records,
    undoes,
)
from .report import Pair, Report
from .targets import ACCOUNT_ID, INSTANCE_ID, REGION

_COUNT = re.compile(r"\d+", re.ASCII)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%", re.ASCII)


CHANGED_NOTHING = "it changed nothing"
UNDONE_LATER = "undone by later runs"
TERMINATED_SINCE = "terminated since"


class SagaError(Exception):
    """No run can be undone as asked; the message is one line for the user. ``why``, for a
    run with nothing to undo: in a few words, why ("undone by later runs")."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why
        self.damaged: list[Damaged] = []  # the ledger's lines that could not be read

    @property
    def nothing_to_undo(self) -> bool:
        """Whether what the run changed is as it was before it already: it changed nothing,
        or later runs undid it. A rollback has then done its job (not so for instances
        terminated since: those it cannot bring back). Never so when lines of the ledger
        could not be read: what they said (an intent, a success) is unknown."""
        return self.why in (CHANGED_NOTHING, UNDONE_LATER) and not self.damaged


def parse_budget(text: str, total: int) -> int:
    """``--max-errors``: a count ("10") or a share of ``total`` intents ("5%", rounded up).

    A share of a small run still allows one failure, so "5%" of 10 intents is 1.
    As SSM's MaxErrors, the run stops when failures exceed the budget, so "0" stops
    at the first one. Raises ``ValueError`` with a one-line message for anything else.
    """
    value = text.strip()
    usage = f"expected a count (0 or more) or a percentage up to 100%, e.g. 10 or 5%; got {text!r}"
    if _COUNT.fullmatch(value):
        return int(value)
    match = _PERCENT.fullmatch(value)
    if match is None:
        raise ValueError(usage)
    share = Fraction(match.group(1))  # exact: "5%" of 200 is 10, not 10.000000000000002
    if not 0 <= share <= 100:
        raise ValueError(usage)
    return math.ceil(share * total / 100)


@dataclass(frozen=True)
class UndoPlan:
    """What compensating one run takes: ``action`` on ``groups``, per (account, region) pair."""

    run: str
    action: ActionSpec  # the action that undoes the run's
    groups: dict[Pair, list[str]]
    # The run's own action ("stop" for a plan that starts).
    of: str = field(default="", compare=False)
    # Intents the run(s) left pending (in flight at a kill, never answered, never
    # sent): the ledger cannot say whether they were done; ask EC2 before undoing.
    unsure: dict[Pair, list[str]] = field(default_factory=dict, compare=False)
    # Instances a terminate of the ledgers got done (before or after): left alone, for a
    # terminated instance can be neither started nor stopped.
    terminated: int = field(default=0, compare=False)
    # Lines of the ledgers that are no record (cut short by a kill, or edited): what they
    # said is unknown to the undo.
    damaged: list[Damaged] = field(default_factory=list, compare=False)
    # Instances a later run of the ledgers undid already: theirs now, left alone.
    superseded: int = field(default=0, compare=False)
    # When the first of the runs began (ISO 8601, as the ledger has it), if known: an
    # unsure instance stopped before it, as EC2 says, was not stopped by them.
    began: str | None = field(default=None, compare=False)
    # The IDs of the runs undone (``run`` is their label, for people).
    runs: tuple[str, ...] = field(default=(), compare=False)

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.groups.values())


def _undo_spec(run: str, action: str) -> ActionSpec:
    spec = ACTIONS.get(action)
    if spec is None or spec.undo is None:
        raise SagaError(f"run {run}: {action} cannot be undone: no action of EC2's takes it back")
    return ACTIONS[spec.undo]


def undo_plan(
    paths: Sequence[str], run: str | Sequence[str] | None = None, *, allow_empty: bool = False
) -> UndoPlan:
    """The plan that undoes ``run`` (one ID or several) of the ledgers ``paths``.

    Without ``run``, the run undone is the ledgers' one run of a reversible action
    (stop, start), or of several, the latest when it alone has something left to undo
    (a run and its resume); else the choice is the user's, and the error lists those
    that have (a merge of shards, or a ledger used by many runs). Several runs are undone
    together only if they ran the same action. The instances are those the runs
    got done (their ``succeeded`` records, ``Reached`` ones included: a wait only
    confirms what the run did), grouped by the account and region of their
    records, in ledger order. Raises :class:`SagaError` when there is no such
    run, its action cannot be undone, or it changed nothing (unless
    ``allow_empty``: it may have left intents pending, :attr:`UndoPlan.unsure`);
    ``LedgerError`` when a ledger cannot be read.
    """
    by_run: dict[str, list[Record]] = {}
    watch = WriteAheadCheck()
    damaged: list[Damaged] = []
    for path in paths:
        for record in read_records(path, damaged):
            by_run.setdefault(watch(record).run, []).append(record)
    # Killed while writing its intents ahead: such a run sent nothing.
    sent_nothing = {c.run for c in watch.cut_short()}
    where = ", ".join(paths) or "no ledger"
    if run is None:
        reversible = sorted(
            (r for r in by_run if _reversible(_actions(by_run[r]))),
            key=lambda r: max(x.ts for x in by_run[r]),
        )
        if not reversible:
            mixed = sorted(r for r in by_run if len(_actions(by_run[r])) > 1)
            if mixed:
                # One run writes one action: such records were written by hand (or
                # another tool), and which of them the run did cannot be told.
                acts = ", ".join(sorted(_actions(by_run[mixed[0]])))
                raise SagaError(
                    f"run {mixed[0]} in {where} holds records of several actions ({acts}); "
                    "a run of swarm has one: its undo is not worked out from them"
                )
            raise SagaError(f"no run of a reversible action (stop, start) in {where}")
        if len(reversible) > 1:
            can, cannot = _candidates(reversible, by_run, sent_nothing, damaged)
            left = [r for r, _ in can]
            undid = {r: _undid(r, by_run) for r in left}
            if left and all(undid.values()) and not set().union(*undid.values()) & set(left):
                # Every run with something left is a rollback of runs with nothing left
                # (one cut short, then finished by another): the ledger's undo is done.
                # Undoing those would make the change they undid again.
                runs_of = ", ".join(sorted(set().union(*undid.values())))
                again = " ".join(f"--run {r}" for r in left)
                one = len(left) == 1
                raise SagaError(
                    f"{'run' if one else 'runs'} {', '.join(left)} in {where} "
                    f"{'is the rollback' if one else 'are the rollbacks'} of run "
                    f"{runs_of}, which {'it' if one else 'they'} undid: nothing else is left "
                    f"to undo (to undo {'that rollback itself' if one else 'those rollbacks'}"
                    f", pass {again})",
                    why=UNDONE_LATER,
                )
            if left != reversible[-1:]:
                raise SagaError(_choose(len(reversible), can, cannot, where, undid))
            # The latest run alone has something left to undo (the others' was undone by
            # later runs, or they changed nothing): the undo of the ledger is its. Unless
            # it is itself the undo of those runs (a rollback): undoing it would make the
            # change they made again, where a rollback after a rolled-back run means
            # that nothing is left to undo.
            reversible = reversible[-1:]
        runs = reversible
    else:
        runs = [run] if isinstance(run, str) else list(run)
    missing = [r for r in runs if r not in by_run]
    if missing:
        raise SagaError(f"no run {', '.join(missing)} in {where}")
    try:
        return _plan(runs, by_run, sent_nothing, damaged, allow_empty=allow_empty)
    except SagaError as exc:
        if exc.why in (CHANGED_NOTHING, UNDONE_LATER) and damaged:
            # A damaged line may have been one of the run's intents or successes (a write-
            # ahead block that reads short reads as one cut short, that sent nothing).
            exc.damaged = list(damaged)
            exc.args = (
                f"{exc}; but {describe_damage(damaged)}: what they held is unknown, so "
                "this may not be so: mend or remove those lines, or roll back with --run "
                "once they are",
            )
        raise


def _candidates(
    runs: list[str],
    by_run: dict[str, list[Record]],
    sent_nothing: set[str],
    damaged: list[Damaged],
) -> tuple[list[tuple[str, str]], list[str]]:
    """Of ``runs``, those with something left to undo (each with a line saying how much),
    in their order, and apart those with nothing (undone by a later run, terminated since,
    or changed nothing), each with why."""
    can: list[tuple[str, str]] = []
    cannot: list[str] = []
    for r in runs:
        try:
            plan = _plan([r], by_run, sent_nothing, damaged, allow_empty=True)
        except SagaError as exc:
            cannot.append(f"{r} ({exc.why or exc})")
            continue
        records = by_run[r]
        unsure = sum(len(ids) for ids in plan.unsure.values())
        undo = ", ".join(
            ([f"{plan.total} to {plan.action.name}"] if plan.total else [])
            + ([f"{unsure} pending to look up"] if unsure else [])
        )
        can.append((r, f"{r} ({records[0].action}, {undo}, last at {max(x.ts for x in records)})"))
    return can, cannot


def _undid(run: str, by_run: dict[str, list[Record]]) -> set[str]:
    """The runs of the ledgers that ``run`` is the rollback of (none for any other run)."""
    return {x for r in by_run[run] for x in undoes(r) if x in by_run and x != run}


def _choose(
    runs: int,
    can: list[tuple[str, str]],
    cannot: list[str],
    where: str,
    undid: dict[str, set[str]] | None = None,
) -> str:
    """The error that asks the user to pick among ``runs`` runs: those with something left
    to undo, and apart those with nothing, which ``--run`` would only refuse. A rollback
    among them that left the run it undoes with something to undo (cut short, or its wait
    did not see it through) is named as such: finishing it is ``--run`` of that run."""
    if not can:
        return (
            f"none of the {runs} runs of stop or start in {where} has anything left to "
            f"undo: {', '.join(cannot)}"
        )
    nothing = f"; nothing left to undo in {', '.join(cannot)}" if cannot else ""
    if len(can) == 1:
        ((only, said),) = can
        return f"one run in {where} has something to undo: {said}{nothing}; pass --run {only}"
    left = {r for r, _ in can}
    of = undid or {}
    unfinished = sorted({x for r in left for x in of.get(r, set()) if x in left})
    lines = [
        f"{c[:-1]}, the rollback of run {', '.join(sorted(of[r]))})" if of.get(r) else c
        for r, c in can
    ]
    finish = (
        "; to finish the rollback of "
        + "; of ".join(f"run {x}, pass --run {x}" for x in unfinished)
        + " (undoing the rollback itself would make the change it undid again)"
        if unfinished
        else ""
    )
    return (
        f"{len(can)} runs in {where} can be undone: {', '.join(lines)}{nothing}{finish}; "
        "else pass --run ID "
        "(repeat it for several: the shards of one job, or a run and its resumes)"
    )


def _plan(
    runs: list[str],
    by_run: dict[str, list[Record]],
    sent_nothing: set[str],
    damaged: list[Damaged],
    *,
    allow_empty: bool,
) -> UndoPlan:
    # Terminated is for good: an instance a terminate of the ledgers got done has nothing
    # to undo (a start of it would only fail, IncorrectInstanceState).
    gone = {
        r.id
        for rs in by_run.values()
        for r in rs
        if r.action == "terminate" and r.status == "succeeded"
    }
    records = [record for r in runs for record in by_run[r]]
    terminated = len({r.id for r in records if r.id in gone})
    records = [r for r in records if r.id not in gone]
    # What a run begun after these (and not undone with them) has undone already (a start
    # after a stop) is that run's now, and whatever came after it: an undo of these would
    # reverse that (after a stop, a start and a stop, an undo of the first would start what
    # the last stopped). A later run of the same action (a resume) goes on with these.
    ran = _actions([x for r in runs for x in by_run[r]])
    reverse = {s.undo for s in (ACTIONS.get(a) for a in ran) if s is not None and s.undo}
    began = {run: min(r.started or r.ts for r in rs) for run, rs in by_run.items()}
    last = max(began[r] for r in runs)
    # The rollbacks of these runs (their intents say "undo of run ..."): for each instance,
    # the latest of them that got it done decides, by whether its wait (if it had one) saw
    # it arrive. One that timed out, could not look, or ended before its wait said a word
    # leaves it to this undo (finishing it is this undo again, with its wait), unless a
    # run that is neither may have changed it since: what that run did stands (a stop on
    # purpose, a rollback of that rollback). By the runs' starts, or across ledgers whose
    # runs overlap, by when that run's call was answered.
    mine = set(runs)
    rollbacks = {run for run in by_run if run not in mine and _undid(run, by_run) & mine}
    later: set[str] = set()
    taken_by: dict[str, str] = {}
    for run, rs in by_run.items():
        if run in mine or began[run] <= last:
            continue
        took = {r.id for r in rs if r.status == "succeeded" and r.action in reverse}
        if run not in rollbacks:
            later |= took
            continue
        for i in took:
            if i not in taken_by or began[run] > began[taken_by[i]]:
                taken_by[i] = run
    # When a run other than these and their rollbacks last may have changed each instance.
    changed: dict[str, str] = {}
    for run, rs in by_run.items():
        if run in mine or run in rollbacks:
            continue
        word: dict[str, Record] = {}  # each intent's last record in the run
        for r in rs:
            if r.action in _STATEFUL and (r.id not in word or r.seq > word[r.id].seq):
                word[r.id] = r
        done = {r.id: r.ts for r in rs if r.action in _STATEFUL and r.status == "succeeded"}
        for i, r in word.items():
            if i in done or _may_change(r, sent_nothing):
                changed[i] = max(changed.get(i, ""), began[run], done.get(i, r.ts))
    final: dict[tuple[str, str], Record] = {}  # each rollback's last record of an instance
    waited: set[tuple[str, str]] = set()  # ... and those it was to --wait for
    for run in set(taken_by.values()):
        for r in by_run[run]:
            if r.action in reverse:
                key = (run, r.id)
                if key not in final or r.seq > final[key].seq:
                    final[key] = r
                if r.waits is not None:
                    waited.add(key)
    for i, run in taken_by.items():
        unseen = (run, i) in waited and _unseen(final[(run, i)])
        if not unseen or changed.get(i, "") > began[run]:
            later.add(i)
    superseded = len({r.id for r in records if r.id in later})
    records = [r for r in records if r.id not in later]
    # What a run's first call found already done (EC2's PreviousState) it did not change:
    # that run has nothing of it to undo (another run undone with it may).
    unchanged = {
        (r.run, r.id) for r in records if r.status == "succeeded" and r.code == WAS_ALREADY_CODE
    }
    # What a resume found already in the end state (AlreadyInState, not sent) it did not
    # change either: unless a run undone with it may have sent it (in flight at a kill),
    # someone else did (it was stopped before the runs began).
    latest: dict[tuple[str, str], Record] = {}
    for r in records:
        known = latest.get((r.run, r.id))
        if known is None or r.seq > known.seq:
            latest[(r.run, r.id)] = r
    sent = {
        i for (_, i), r in latest.items() if r.status == "pending" and _maybe_sent(r, sent_nothing)
    }
    unchanged |= {
        (r.run, r.id)
        for r in records
        if r.status == "succeeded" and r.code == ALREADY_CODE and r.id not in sent
    }
    records = [r for r in records if (r.run, r.id) not in unchanged]
    actions = _actions(records) or _actions([x for r in runs for x in by_run[r]])
    label = ", ".join(runs)
    if len(actions) != 1:
        raise SagaError(f"run {label} holds several actions ({', '.join(sorted(actions))})")
    (action,) = actions
    undo = _undo_spec(label, action)
    groups: dict[Pair, list[str]] = {}
    seen: set[str] = set()
    for record in records:
        if record.status != "succeeded" or record.id in seen:
            continue  # the same record twice when ledgers overlap (e.g. a merge and its input)
        if record.region is None:
            raise SagaError(f"run {record.run}: the ledger names no region for {record.id}")
        seen.add(record.id)
        groups.setdefault(Pair(record.account, record.region), []).append(record.id)
    # Each intent's last word in the run: its best status, then its latest record.
    best: dict[str, Record] = {}
    for record in records:
        if record.id in seen:
            continue
        known = best.get(record.id)
        if known is None or _last_word(record) > _last_word(known):
            best[record.id] = record
    # What a later run of the same action (a resume) changed itself, its call finding
    # the instance still to change (a success that is no WasAlready), these runs' calls
    # left pending did not do: that run's, not theirs to undo.
    redone = {
        r.id
        for run, rs in by_run.items()
        if run not in runs and began[run] > last
        for r in rs
        if r.action in ran and r.status == "succeeded" and r.code is None
    }
    unsure: dict[Pair, list[str]] = {}
    for record in best.values():
        maybe_sent = _maybe_sent(record, sent_nothing) and record.id not in redone
        if record.status == "pending" and maybe_sent and record.region is not None:
            unsure.setdefault(Pair(record.account, record.region), []).append(record.id)
    if not groups and not (allow_empty and unsure):
        if terminated:
            raise SagaError(
                f"run {label} ({action}): its {terminated} instance(s) were terminated since "
                "(a terminate in the ledger): nothing to undo",
                TERMINATED_SINCE,
            )
        if superseded:
            raise SagaError(
                f"run {label} ({action}): its {superseded} instance(s) were undone by later runs "
                "of the ledger already: nothing to undo (roll back the latest run)",
                UNDONE_LATER,
            )
        raise SagaError(f"run {label} ({action}) changed nothing: nothing to undo", CHANGED_NOTHING)
    first = min(began[r] for r in runs)
    return UndoPlan(
        label,
        undo,
        groups,
        action,
        unsure,
        terminated,
        damaged,
        superseded,
        first or None,
        tuple(runs),
    )


_STATEFUL = ("stop", "start")  # the actions whose end state a rollback undoes


def _may_change(record: Record, sent_nothing: set[str]) -> bool:
    """Whether ``record`` says its run may have changed the instance: done, or a call that
    may have acted (no answer, or a 5xx, which EC2 may have carried out before failing)."""
    if record.status == "succeeded":
        return True
    if record.status == "failed":
        return (record.http_status or 0) >= 500
    return record.status == "pending" and _maybe_sent(record, sent_nothing)


def _unseen(last: Record) -> bool:
    """Whether ``last``, a run's latest record of an intent it was to --wait for, leaves
    it unseen: its wait timed out or could not look (pending), or no record of the wait
    follows the call's success (the run ended before its wait did)."""
    return last.status == "pending" or (last.status == "succeeded" and last.code != REACHED_CODE)


def _maybe_sent(record: Record, sent_nothing: set[str]) -> bool:
    """Whether a pending record's call may have acted: pending as written ahead (a kill
    left no outcome), or its outcome says so (a call that got no answer, or an error of
    the endpoint's own, a 5xx; accepted, then --wait did not see it arrive). Not when
    each of its calls was refused before EC2 acted (throttled, refused with the rest of
    a batch) or none left before the run stopped: its attempts say nothing of that."""
    return (record.intents is not None and record.run not in sent_nothing) or (
        record.intents is None and may_have_acted(record)
    )


def _last_word(record: Record) -> tuple[int, int]:
    return (STATUS_RANK[record.status], record.seq)


def check_ids(plan: UndoPlan) -> None:
    """Refuse a plan whose IDs, regions or accounts are not what EC2 names them.

    They are read from a ledger, which is a text file anyone may have edited:
    an escape sequence, an upper-case or padded ID, or a region that is a host
    name must never reach a call. Raises :class:`SagaError` naming the first.
    """
    bad: list[str] = []
    for pairs in (plan.groups, plan.unsure):
        for pair, ids in pairs.items():
            if not REGION.fullmatch(pair.region):
                bad.append(f"region {pair.region[:40]!a}")
            if pair.account is not None and not ACCOUNT_ID.fullmatch(pair.account):
                bad.append(f"account {pair.account[:40]!a}")
            bad += [f"ID {i[:40]!a}" for i in ids if not INSTANCE_ID.fullmatch(i)]
    if bad:
        raise SagaError(
            f"run {plan.run}: the ledger holds {len(bad)} value(s) that are not as EC2 names "
            f"them (first: {bad[0]}): fix or remove those lines; nothing was sent"
        )


def undo_report(report: Report) -> UndoPlan:
    """The plan that undoes a run just finished, from its report (for a run without a ledger)."""
    undo = _undo_spec(report.run, report.action)
    groups = {pair: list(ids) for pair, ids in report.done.items() if ids}
    if not groups:
        raise SagaError(
            f"run {report.run} ({report.action}) changed nothing: nothing to undo", CHANGED_NOTHING
        )
    return UndoPlan(report.run, undo, groups, runs=(report.run,))


def _actions(records: Sequence[Record]) -> set[str]:
    return {r.action for r in records}


def _reversible(actions: set[str]) -> bool:
    if len(actions) != 1:
        return False
    spec = ACTIONS.get(next(iter(actions)))
    return spec is not None and spec.reversible
