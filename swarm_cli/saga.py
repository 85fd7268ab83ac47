"""A run as a saga: a failure budget (``--max-errors``) and compensation from the ledger.

Stop and start undo each other, so a run of either can be compensated by running
the other on what it got done. Terminate (and reboot) cannot be undone: for
them the budget only stops the run early.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from .actions import ACTIONS, ActionSpec
from .ledger import REACHED_CODE, Record, read_records
from .report import Pair, Report

_COUNT = re.compile(r"\d+")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")


class SagaError(Exception):
    """No run can be undone as asked; the message is one line for the user."""


def parse_budget(text: str, total: int) -> int:
    """``--max-errors``: a count ("10") or a share of ``total`` intents ("5%", rounded up).

    A share of a small run still allows one failure, so "5%" of 10 intents is 1.
    Raises ``ValueError`` with a one-line message for anything else, zero included
    (a budget of nothing would stop the run before its first failure could count).
    """
    value = text.strip()
    usage = (
        f"expected a count of at least 1 or a percentage up to 100%, e.g. 10 or 5%; got {text!r}"
    )
    if _COUNT.fullmatch(value):
        count = int(value)
        if count < 1:
            raise ValueError(usage)
        return count
    match = _PERCENT.fullmatch(value)
    if match is None:
        raise ValueError(usage)
    share = Fraction(match.group(1))  # exact: "5%" of 200 is 10, not 10.000000000000002
    if not 0 < share <= 100:
        raise ValueError(usage)
    return max(1, math.ceil(share * total / 100))


@dataclass(frozen=True)
class UndoPlan:
    """What compensating one run takes: ``action`` on ``groups``, per (account, region) pair."""

    run: str
    action: ActionSpec  # the action that undoes the run's
    groups: dict[Pair, list[str]]

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.groups.values())


def _undo_spec(run: str, action: str) -> ActionSpec:
    spec = ACTIONS.get(action)
    if spec is None or spec.undo is None:
        raise SagaError(f"run {run}: {action} cannot be undone: its budget only stops the run")
    return ACTIONS[spec.undo]


def undo_plan(paths: Sequence[str], run: str | None = None) -> UndoPlan:
    """The plan that undoes ``run`` (or the latest reversible run) of the ledgers ``paths``.

    The latest run is the one whose last record is newest, among runs of a
    reversible action (stop, start). The instances are those the run itself got
    done: its ``succeeded`` records, less the ``Reached`` ones a wait appended,
    grouped by the account and region of their records, in ledger order.
    Raises :class:`SagaError` when there is no such run, its action cannot be
    undone, or it got nothing done; ``LedgerError`` when a ledger cannot be read.
    """
    by_run: dict[str, list[Record]] = {}
    last_ts: dict[str, str] = {}
    for path in paths:
        for record in read_records(path):
            by_run.setdefault(record.run, []).append(record)
            last_ts[record.run] = max(record.ts, last_ts.get(record.run, record.ts))
    where = ", ".join(paths) or "no ledger"
    if run is None:
        reversible = [r for r in by_run if _reversible(_actions(by_run[r]))]
        if not reversible:
            raise SagaError(f"no run of a reversible action (stop, start) in {where}")
        run = max(reversible, key=lambda r: (last_ts[r], r))
    records = by_run.get(run)
    if records is None:
        raise SagaError(f"no run {run} in {where}")
    actions = _actions(records)
    if len(actions) != 1:
        raise SagaError(f"run {run} holds several actions ({', '.join(sorted(actions))})")
    (action,) = actions
    undo = _undo_spec(run, action)
    groups: dict[Pair, list[str]] = {}
    seen: set[str] = set()
    for record in records:
        if record.status != "succeeded" or record.code == REACHED_CODE or record.id in seen:
            continue  # the same record twice when ledgers overlap (e.g. a merge and its input)
        if record.region is None:
            raise SagaError(f"run {run}: the ledger names no region for {record.id}")
        seen.add(record.id)
        groups.setdefault(Pair(record.account, record.region), []).append(record.id)
    if not groups:
        raise SagaError(f"run {run} ({action}) got nothing done: nothing to undo")
    return UndoPlan(run, undo, groups)


def undo_report(report: Report) -> UndoPlan:
    """The plan that undoes a run just finished, from its report (for a run without a ledger)."""
    undo = _undo_spec(report.run, report.action)
    groups = {pair: list(ids) for pair, ids in report.done.items() if ids}
    if not groups:
        raise SagaError(f"run {report.run} ({report.action}) got nothing done: nothing to undo")
    return UndoPlan(report.run, undo, groups)


def _actions(records: Sequence[Record]) -> set[str]:
    return {r.action for r in records}


def _reversible(actions: set[str]) -> bool:
    if len(actions) != 1:
        return False
    spec = ACTIONS.get(next(iter(actions)))
    return spec is not None and spec.reversible
