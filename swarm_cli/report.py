"""What a run did, as typed data: one row per (account, region) pair and the totals.

The display renders it; ``--output json`` prints :meth:`Report.to_dict`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, NamedTuple

from .events import RESOLVED
from .ledger.record import PERMANENT_CODES
from .outcome import Outcome


class Pair(NamedTuple):
    """One account and region: one bucket per action, so one window.

    A named tuple, not a dataclass: lists of 100,000 IDs are grouped by pair, and a
    tuple hashes and compares in C.
    """

    account: str | None
    region: str

    @property
    def label(self) -> str:
        return f"{self.account}/{self.region}" if self.account else self.region


class Recorded:
    """Where a ledger holds an intent of each ID: its region and account, if recorded.

    A resource a Describe call does not list is done on a resume only if the ledger
    holds an intent of it *there*: a resume in another region or account, whose
    Describe finds nothing, must not take that for done.
    """

    def __init__(self) -> None:
        self._where: dict[str, set[tuple[str | None, str | None]]] = {}
        # When a call of each may last have left (None: a time that cannot be read);
        # left out where EC2 took a call of it (accepted): then it was there.
        self._when: dict[str, datetime | None] = {}
        self._accepted: set[str] = set()

    def add(
        self,
        resource_id: str,
        region: str | None,
        account: str | None,
        ts: str | None = None,
        *,
        accepted: bool = False,
    ) -> None:
        self._where.setdefault(resource_id, set()).add((region, account))
        if accepted:
            self._accepted.add(resource_id)
            return
        when = parse_ts(ts)
        if resource_id in self._when:
            known = self._when[resource_id]
            if known is None or (when is not None and when <= known):
                return  # a time not known stays so (taken as recent); else the latest
        self._when[resource_id] = when

    def since(self, resource_id: str, now: datetime) -> float | None:
        """Seconds since a call of ``resource_id`` may last have left: 0 when no record
        says when (taken as just now), None where EC2 took a call of it (it was there)."""
        if resource_id in self._accepted or resource_id not in self._when:
            return None
        when = self._when[resource_id]
        return 0.0 if when is None else (now - when).total_seconds()

    def forget(self, resource_ids: Iterable[str]) -> None:
        """No longer held anywhere: what a resume could not tell from IDs no run sent."""
        for resource_id in resource_ids:
            self._where.pop(resource_id, None)

    def ids(self) -> set[str]:
        return set(self._where)

    def holds(self, resource_id: str, pair: Pair, *, named: bool = False) -> bool:
        """Whether an intent of ``resource_id`` was recorded in ``pair`` (an unnamed region
        or account, as older ledgers leave them, matches any; with ``named``, an unnamed
        region matches none)."""
        return any(
            (region == pair.region if named else region is None or region == pair.region)
            and (account is None or pair.account is None or account == pair.account)
            for region, account in self._where.get(resource_id, ())
        )


def parse_ts(ts: str | None) -> datetime | None:
    """A ledger record's time (ISO 8601, UTC), or None if it has none or is not one."""
    if not ts:
        return None
    try:
        when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Reason:
    code: str | None
    message: str | None

    @classmethod
    def of(cls, outcome: Outcome | None) -> Reason | None:
        return None if outcome is None else cls(outcome.code, outcome.message)

    @property
    def text(self) -> str:
        """``code: message``, either left out when it is None."""
        return ": ".join(x for x in (self.code, self.message) if x)


@dataclass(frozen=True)
class Problem:
    """An intent that did not succeed."""

    id: str
    status: str
    code: str | None
    message: str | None
    region: str | None = None
    account: str | None = None


@dataclass
class WindowReport:
    final: float = 0.0
    peak: float = 0.0
    ssthresh: float = 0.0
    pace_seconds: float = 0.0
    decreases: int = 0
    # (seconds since start, cwnd) at each change: enough to draw the window.
    trajectory: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Sample:
    """One point of a pair's run over time, for charts."""

    t: float  # seconds since the pair started
    cwnd: float
    in_flight: int
    done: int  # intents with a known outcome so far
    throttled: int  # throttled calls so far


def no_counts() -> dict[str, int]:
    return dict.fromkeys(RESOLVED, 0)


@dataclass
class PairReport:
    """One (account, region) pair's share of the run."""

    region: str
    account: str | None = None
    total: int = 0
    counts: dict[str, int] = field(default_factory=no_counts)
    calls: int = 0
    throttled_calls: int = 0
    retries: int = 0
    timeouts: int = 0
    unchanged: int = 0  # succeeded, already in the action's state: the call changed nothing
    outages: int = 0
    stood_still_seconds: float = 0.0  # the process stood still (Ctrl-Z, suspended), in all
    peak_in_flight: int = 0
    elapsed_seconds: float = 0.0
    window: WindowReport = field(default_factory=WindowReport)
    errors: dict[str, int] = field(default_factory=dict)
    fatal: Reason | None = None
    stopped: Reason | None = None
    gave_up: bool = False
    # An unexpected exception ended this pair's thread (or kept it from starting).
    crashed: Reason | None = None
    endpoint: str | None = None
    # Points over time (bounded): the charts' data; left out of the JSON summary.
    # Seconds every answer had been a throttle when the pair ended, if STORM_LASTING or more.
    throttled_for: float | None = None
    series: list[Sample] = field(default_factory=list, repr=False)

    @property
    def pair(self) -> Pair:
        return Pair(self.account, self.region)


@dataclass
class Report:
    run: str
    action: str
    dry_run: bool = False
    endpoint: str | None = None
    window_profile: str = "adaptive"
    batch_size: int = 10
    auto_batch: bool = False
    pairs: list[PairReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    signal: str | None = None
    ledger: str | None = None
    ledger_error: str | None = None
    unrecorded: int = 0
    budget_spent: Reason | None = None  # --max-errors stopped the run
    elapsed_seconds: float = 0.0
    exit_code: int = 0
    # Set by the sandbox runs (demo, rehearsal), a wait and a rollback.
    extra: dict[str, Any] = field(default_factory=dict)
    # The IDs each pair got done, for a wait or a rollback (not printed: it can be long).
    done: dict[Pair, list[str]] = field(default_factory=dict, repr=False)
    # When the run's ledger records say it started, and its last seq, for records
    # added to the run later (--wait's reached states); not printed.
    ledger_started: str | None = field(default=None, repr=False)
    ledger_seq: int = field(default=0, repr=False)
    # The options a retry of what is left repeats (cli.common.retry_args); not printed.
    retry_args: tuple[str, ...] = field(default=(), repr=False)
    # False when the write-ahead block was cut short: the ledger lacks some intents.
    intents_recorded: bool = field(default=True, repr=False)
    # What the run's --rollback undid (its undo's successes); not printed.
    undone: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def total(self) -> int:
        return sum(p.total for p in self.pairs)

    @property
    def counts(self) -> dict[str, int]:
        return _sum_counts(p.counts for p in self.pairs)

    @property
    def interrupted(self) -> bool:
        return self.signal is not None

    @property
    def fatal(self) -> Reason | None:
        return next((p.fatal for p in self.pairs if p.fatal), None)

    @property
    def stopped(self) -> Reason | None:
        return self.budget_spent or next((p.stopped for p in self.pairs if p.stopped), None)

    def stopped_in(self) -> list[str]:
        """The labels of the pairs the run's stop (fatal, else stopped early) came from,
        where they are some of its pairs, not all: a stop of the whole run (a signal, the
        failure budget, the ledger) or of its only pair names none."""
        if self.fatal:
            why, of = self.fatal, [p.fatal for p in self.pairs]
        elif self.stopped and not self.budget_spent:
            why, of = self.stopped, [p.stopped for p in self.pairs]
        else:
            return []
        # Those stopped for the reason the summary gives, not another.
        labels = [p.pair.label for p, r in zip(self.pairs, of, strict=True) if r == why]
        return labels if len(labels) < len(self.pairs) else []

    def failed_for_good(self) -> Counter[str | None]:
        """The codes of the failures a retry would only repeat (protected, in a state
        the action does not apply to, ...), by how many failed so."""
        return Counter(
            p.code for p in self.problems if p.status == "failed" and p.code in PERMANENT_CODES
        )

    def why(self, skip: Collection[str] = ()) -> str:
        """The errors behind what did not succeed, the commonest first ("InternalError x
        3"), codes in ``skip`` and missing ones aside; else why the run stopped; else ""."""
        codes = Counter(
            p.code for p in self.problems if p.code and p.status != "missing" and p.code not in skip
        )
        if codes:
            return ", ".join(f"{code} x {n}" for code, n in codes.most_common(3))
        cause = self.fatal or self.stopped
        return (cause.code or cause.message or "") if cause is not None else ""

    @property
    def crashed(self) -> Reason | None:
        return next((p.crashed for p in self.pairs if p.crashed), None)

    @property
    def gave_up(self) -> bool:
        return any(p.gave_up for p in self.pairs)

    def total_of(self, name: str) -> int:
        return int(sum(getattr(p, name) for p in self.pairs))

    @property
    def window(self) -> WindowReport | None:
        """The window of a single-pair run (several pairs each have their own)."""
        return self.pairs[0].window if len(self.pairs) == 1 else None

    def unseen(self) -> list[Problem]:
        """What the run's --wait did not see reach the action's state, as the ledger
        records it (a call accepted is no state checked)."""
        fields_ = ("id", "status", "code", "message", "region", "account")
        waited = self.extra.get("wait") or {}
        return [Problem(**{k: p.get(k) for k in fields_}) for p in waited.get("problems", ())]

    def not_done(self) -> list[Problem]:
        """Every intent the ledger does not record done: the calls' own problems, then
        those whose --wait did not see them get there."""
        return [*self.problems, *self.unseen()]

    def to_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            return None if value is None else asdict(value)

        errors: dict[str, int] = {}
        for p in self.pairs:
            for code, n in p.errors.items():
                errors[code] = errors.get(code, 0) + n
        return {
            "run": self.run,
            "action": self.action,
            "dry_run": self.dry_run,
            "region": self.pairs[0].region if len(self.pairs) == 1 else None,
            "endpoint": self.endpoint,
            "window_profile": self.window_profile,
            "batch_size": "auto" if self.auto_batch else self.batch_size,
            "total": self.total,
            "counts": self.counts,
            "calls": self.total_of("calls"),
            "throttled_calls": self.total_of("throttled_calls"),
            "retries": self.total_of("retries"),
            "timeouts": self.total_of("timeouts"),
            "unchanged": self.total_of("unchanged"),
            "outages": self.total_of("outages"),
            "peak_in_flight": max((p.peak_in_flight for p in self.pairs), default=0),
            "window": plain(self.window),
            "errors": dict(sorted(errors.items())),
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "pairs": [_without_series(p) for p in self.pairs],
            "problems": [asdict(p) for p in self.problems],
            "fatal": plain(self.fatal),
            "stopped": plain(self.stopped),
            "crashed": plain(self.crashed),
            "interrupted": self.interrupted,
            "signal": self.signal,
            "gave_up": self.gave_up,
            "ledger": self.ledger,
            "ledger_error": self.ledger_error,
            "unrecorded": self.unrecorded,
            **self.extra,
            "exit_code": self.exit_code,
        }


def _without_series(row: PairReport) -> dict[str, Any]:
    data = asdict(row)
    del data["series"]
    return data


def _sum_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total = no_counts()
    for c in counts:
        for status, n in c.items():
            total[status] += n
    return total


def in_pairs(report: Report, shown: Callable[[str], str]) -> str:
    """Where a run's stop came from (:meth:`Report.stopped_in`), as " in A, B and 2
    more", each label as ``shown`` writes it; "" where there is nothing to name."""
    labels = [shown(label) for label in report.stopped_in()]
    if not labels:
        return ""
    more = f" and {len(labels) - 3} more" if len(labels) > 3 else ""
    return f" in {', '.join(labels[:3])}{more}"
