"""One run: a job's (account, region) pairs, each an engine with its own window, run at
once and wired to one ledger, the failure budget, the signals and whoever watches.

The runner knows no screen: what a person sees is a :class:`Watcher` handed in by the
command line (``views.ConsoleWatcher``), told when the lanes start and end and what went
wrong, and given each engine's subscribers to add (the call log).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import FrameType
from typing import Literal

from .actions import ACTIONS, ActionSpec
from .batching import AutoBatch, CallLimits
from .engine import STUCK_PATIENCE, Action, Engine, RunResult, signal_name
from .errors import (
    EXIT_CREDENTIALS,
    EXIT_FAILED,
    EXIT_LEDGER,
)
from .events import RESOLVED, Event, Failed, Listener, Missing, Resolved, Subscriber
from .ledger import LedgerError, LedgerWriter, undo_note
from .outage import Outage
from .outcome import Kind, Outcome
from .report import Pair, PairReport, Problem, Reason, Report
from .rto import FLOOR as RTO_FLOOR
from .rto import FixedTimeout, Rto
from .runtime import Runtime
from .stats import Stats
from .trace import Trace
from .window import ADAPTIVE, Profile, new_controller

EXIT_OK = 0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

ProgressMode = Literal["auto", "live", "plain", "none"]


@dataclass(frozen=True)
class EngineOptions:
    """What tunes each pair's engine and controller."""

    batch_size: int = 10
    auto_batch: bool = False
    headroom: float = 0.0
    max_attempts: int = 5
    window: Profile = ADAPTIVE
    drain_timeout: float = 3.0
    call_timeout: float | None = None
    min_timeout: float = RTO_FLOOR
    max_outage: float = 45.0
    poll_interval: float = 2.0


@dataclass(frozen=True)
class Sinks:
    """Where a run's results go besides its report: files, and what the views show."""

    ledger: str | None = None
    trace: str | None = None
    progress: ProgressMode = "auto"
    verbose: bool = False
    endpoint: str | None = None
    badges: tuple[str, ...] = ()
    bound_rate: float | None = None
    already_done: int = 0


@dataclass(frozen=True)
class RunOptions:
    """Every option of a run as the command line gives it, in one place; :attr:`tuning`
    and :attr:`sinks` split it into what tunes the engines and where results go (the
    rest, ``dry_run``, ``missing_ok`` and ``max_errors``, is the run's own policy)."""

    dry_run: bool = False
    batch_size: int = 10  # IDs per call; with auto_batch, the size to start from
    auto_batch: bool = False  # --batch-size auto: sized from what the answers show
    headroom: float = 0.0  # --headroom: the share of the found rate left to other clients
    trace: str | None = None  # --trace: the window's state per call, as JSON lines
    max_attempts: int = 5
    window: Profile = ADAPTIVE
    ledger: str | None = None
    progress: ProgressMode = "auto"
    drain_timeout: float = 3.0
    call_timeout: float | None = None  # None: follow the endpoint's measured round trips
    # The least a call is waited for, when the wait follows the round trips.
    min_timeout: float = RTO_FLOOR
    max_outage: float = 45.0
    missing_ok: bool = False
    # Stop sending once this many intents have failed (--max-errors); None: no budget.
    max_errors: int | None = None
    endpoint: str | None = None  # for the report, any password already replaced
    poll_interval: float = 2.0  # between asks of an instance not there yet (--wait)
    verbose: bool = False  # one line per call
    badges: tuple[str, ...] = ()  # shown in the live view's header: "DRY RUN", "SANDBOX"
    bound_rate: float | None = None  # instances/s one pair's buckets allow, where known
    already_done: int = 0  # intents a resume skipped, for the view

    @property
    def tuning(self) -> EngineOptions:
        return EngineOptions(
            batch_size=self.batch_size,
            auto_batch=self.auto_batch,
            headroom=self.headroom,
            max_attempts=self.max_attempts,
            window=self.window,
            drain_timeout=self.drain_timeout,
            call_timeout=self.call_timeout,
            min_timeout=self.min_timeout,
            max_outage=self.max_outage,
            poll_interval=self.poll_interval,
        )

    @property
    def sinks(self) -> Sinks:
        return Sinks(
            ledger=self.ledger,
            trace=self.trace,
            progress=self.progress,
            verbose=self.verbose,
            endpoint=self.endpoint,
            badges=self.badges,
            bound_rate=self.bound_rate,
            already_done=self.already_done,
        )


@dataclass(frozen=True)
class Job:
    """What to do: one action on the instances of each (account, region) pair."""

    action: ActionSpec
    groups: Mapping[Pair, Sequence[str]]
    options: RunOptions = field(default_factory=RunOptions)
    title: str = ""
    # Intents recorded with an outcome and never sent (e.g. protected by --protect-tag).
    settled: Mapping[Pair, Mapping[str, Outcome]] = field(default_factory=dict)
    # A tag run's tags (operation_call.tags_text), on its write-ahead records.
    tags: str | None = None
    # The state a --wait after the run waits for, on its records (see ledger.unchecked).
    waits: str | None = None
    # The runs this one undoes (a rollback): said on its intents (see saga.UNDO_OF).
    undoes: tuple[str, ...] = ()

    @classmethod
    def single(
        cls,
        ids: Sequence[str],
        region: str,
        options: RunOptions | None = None,
        *,
        action: str = "terminate",
        account: str | None = None,
    ) -> Job:
        return cls(ACTIONS[action], {Pair(account, region): list(ids)}, options or RunOptions())

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.groups.values())


def new_engine(
    action: Action,
    options: EngineOptions | RunOptions,
    subscribers: Sequence[Listener] = (),
    runtime: Runtime | None = None,
    limits: CallLimits | None = None,
) -> Engine:
    """One pair's engine and controller, as every run builds them (the simulator too)."""
    o = options.tuning if isinstance(options, RunOptions) else options
    return Engine(
        action,
        new_controller(o.window, o.headroom),
        batch_size=AutoBatch(o.batch_size, limits) if o.auto_batch else o.batch_size,
        max_attempts=o.max_attempts,
        subscribers=subscribers,
        timeouts=Rto(floor=o.min_timeout)
        if o.call_timeout is None
        else FixedTimeout(o.call_timeout),
        outage=Outage(max_outage=o.max_outage),
        drain_timeout=o.drain_timeout,
        poll_interval=o.poll_interval,
        runtime=runtime,
        stuck=waiting_on_credentials,
    )


def waiting_on_credentials(thread: int) -> Outcome | None:
    """A call whose thread waits inside botocore's credential providers while a
    credential helper runs (in that thread, or in the one whose refresh it waits for): a
    failure of the credentials, which no endpoint's answer would end. Not a refresh that
    waits on STS (a role's): that is the endpoint's, and an outage's to handle."""
    frames = sys._current_frames()
    if not _within(frames.get(thread), "botocore/credentials.py"):
        return None
    helper = any(
        _within(f, "botocore/credentials.py") and _within(f, "/subprocess.py")
        for f in frames.values()
    )
    if not helper:
        return None
    return Outcome(
        Kind.FATAL,
        "CredentialRetrievalError",
        f"refreshing the credentials gave no answer in {STUCK_PATIENCE:g}s (a "
        "credential_process or SSO helper that hangs?) -- nothing more is sent with them; "
        "run the helper by hand to see what it waits for",
    )


def _within(frame: FrameType | None, path: str) -> bool:
    """Whether ``frame`` or one that called it runs code of a file ending in ``path``."""
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith(path):
            return True
        frame = frame.f_back
    return False


# Builds the action for one pair (its client, credentials, dry run); may raise, which
# stops that pair only: its intents are recorded pending with the reason.
ActionFactory = Callable[[Pair], Action]
Classify = Callable[[Exception], Outcome]


class LedgerSubscriber(Subscriber):
    """Each outcome, as it comes, to the ledger (its writer thread does the I/O)."""

    def __init__(self, writer: LedgerWriter, pair: Pair) -> None:
        self.writer = writer
        self.pair = pair

    def on_resolved(self, event: Resolved) -> None:
        o = event.outcome
        self.writer.write(
            event.ids[0],
            event.status,
            attempts=event.attempts,
            code=o.code if o else None,
            message=o.message if o else None,
            http_status=o.http_status if o else None,
            request_id=o.request_id if o else None,
            region=self.pair.region,
            account=self.pair.account,
        )


class Problems:
    """Every intent that did not succeed, for the summary."""

    def __init__(self) -> None:
        self.items: list[Problem] = []
        self._lock = threading.Lock()

    def subscriber(self, pair: Pair) -> Subscriber:
        return _PairProblems(self, pair)

    def add(self, problem: Problem) -> None:
        with self._lock:
            self.items.append(problem)


class _PairProblems(Subscriber):
    def __init__(self, problems: Problems, pair: Pair) -> None:
        self.problems = problems
        self.pair = pair

    def on_resolved(self, event: Resolved) -> None:
        if event.status == "succeeded":
            return
        o = event.outcome
        self.problems.add(
            Problem(
                event.ids[0],
                event.status,
                o.code if o else None,
                o.message if o else None,
                self.pair.region,
                self.pair.account,
            )
        )


class Budget(Subscriber):
    """``--max-errors``: once more intents than that have failed (or are missing, unless
    ``missing_ok``: then a missing one is done, as for the exit code), every pair stops
    sending."""

    def __init__(
        self, limit: int, stop: Callable[[Outcome], None], *, missing_ok: bool = False
    ) -> None:
        self.limit = limit
        self.spent: Outcome | None = None
        self.missing_ok = missing_ok
        self._stop = stop
        self._failed = 0
        self._lock = threading.Lock()

    def on_failed(self, event: Failed) -> None:
        self._count(event)

    def on_missing(self, event: Missing) -> None:
        if not self.missing_ok:
            self._count(event)

    def _count(self, event: Resolved) -> None:
        # Only what EC2 refused counts: an intent a rail settled unsent (attempts 0) does not.
        if event.attempts == 0:
            return
        with self._lock:
            self._failed += 1
            # As SSM's MaxErrors: stop once failures exceed the budget (0 stops at the first).
            if self._failed <= self.limit or self.spent is not None:
                return
            self.spent = Outcome(
                Kind.UNREACHABLE,
                "MaxErrors",
                f"the failure budget is spent: {self._failed} failed"
                + ("" if self.missing_ok else " or missing")
                + f", over --max-errors {self.limit}",
            )
        self._stop(self.spent)


def exit_code(report: Report, *, missing_ok: bool = False) -> int:
    if report.ledger_error is not None:
        return EXIT_LEDGER
    if report.fatal is not None:
        return EXIT_CREDENTIALS
    if report.signal is not None:
        return 128 + signal.Signals[report.signal].value
    if report.crashed is not None:  # whatever the counts say, the run did not finish
        return EXIT_FAILED
    c = report.counts
    left = c["failed"] + c["pending"] + (0 if missing_ok else c["missing"])
    return EXIT_FAILED if left else EXIT_OK


def heeded(signals: Sequence[signal.Signals]) -> list[signal.Signals]:
    """Those of ``signals`` the process was not told to ignore (by whoever started it)."""
    return [s for s in signals if signal.getsignal(s) is not signal.SIG_IGN]


@contextlib.contextmanager
def orderly_stops(stop: Callable[[int], None]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP call ``stop(signum)`` instead of killing the process.

    The handler only records the signal; each dispatcher sees it within its poll
    interval, so no signal can land between two steps of an engine's bookkeeping. A
    signal ignored when the process began stays ignored (``nohup`` ignores SIGHUP so that
    the run outlives its terminal; a shell ignores SIGINT for a job it sends to the
    background).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in heeded(STOP_SIGNALS)}
    for s in previous:
        signal.signal(s, lambda signum, frame: stop(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class _Lane:
    """One pair's engine, its counters and its result."""

    def __init__(
        self,
        pair: Pair,
        ids: Sequence[str],
        engine: Engine,
        stats: Stats,
        settled: Mapping[str, Outcome] | None = None,
    ) -> None:
        self.pair = pair
        self.ids = ids
        self.settled = settled or {}
        self.engine = engine
        self.stats = stats
        self.result = RunResult()
        self.done: list[str] = []
        # Each intent's last outcome as the subscribers saw it: what a lane that died holds.
        self.resolved: dict[str, str] = {}
        # An exception that ended this lane's thread, or kept it from starting.
        self.crash: BaseException | None = None
        engine.subscribers.append(self._note)
        self.thread = threading.Thread(target=self._run, name=f"swarm-{pair.label}", daemon=True)

    def _note(self, event: Event) -> None:
        if isinstance(event, Resolved):
            self.resolved[event.ids[0]] = event.status
            if event.status == "succeeded":
                self.done.append(event.ids[0])

    def _run(self) -> None:
        try:
            self.result = self.engine.run(self.ids, self.settled)
        except BaseException as err:  # the run must end non-zero, naming it
            self.crash = err
            self.engine.stop(self.crashed)

    def start(self) -> None:
        try:
            self.thread.start()
        except BaseException as err:  # e.g. no thread can be started
            self.crash = err

    @property
    def crashed(self) -> Outcome | None:
        """Why this lane ended without finishing its engine's run, or None."""
        err = self.crash
        if err is None:
            return None
        return Outcome(Kind.UNREACHABLE, "InternalError", f"{type(err).__name__}: {err}")

    def settle_crash(self) -> None:
        """A lane that died: what its subscribers saw resolved, the rest pending (as the
        ledger has them: written ahead, never resolved)."""
        counts: dict[str, int] = dict.fromkeys(RESOLVED, 0)
        for status in self.resolved.values():
            counts[status] += 1
        counts["pending"] += len(set(self.ids) - set(self.resolved))
        self.result = RunResult(counts=counts, stopped=self.crashed)


def _no_action(ids: Sequence[str]) -> Mapping[str, Outcome]:
    raise AssertionError("a refused pair sends nothing")


class Watcher:
    """Whoever shows a run: told what happens, one method each, doing nothing unless
    overridden. The command line's is ``views.ConsoleWatcher``; a run nobody watches
    gets this one."""

    def subscribers(self, pair: Pair, several: bool) -> Sequence[Listener]:
        """What else listens to this pair's engine (e.g. the call log of ``--verbose``)."""
        return ()

    def on_start(self, lanes: Sequence[tuple[str, Stats]]) -> None:
        """The pairs are about to start: (label, its counters) for each."""

    def on_end(self) -> None:
        """Every pair is over (called whenever :meth:`on_start` was)."""

    def on_no_trace(self, reason: str) -> None:
        """``--trace`` could not be opened: the run goes on without it."""

    def on_ledger_failed(
        self, message: str, sent: bool, unrecorded: Sequence[Mapping[str, object]]
    ) -> None:
        """The ledger could not be written; ``unrecorded``: the outcomes it could not hold,
        as ledger records (``sent``: whether any call had left)."""

    def on_lane_crashed(self, label: str, message: str, pending: int, in_ledger: bool) -> None:
        """A pair ended on an unexpected error; ``pending`` of its intents are not done."""


def run(
    job: Job,
    make_action: ActionFactory,
    watcher: Watcher | None = None,
    *,
    classify: Classify | None = None,
) -> Report:
    """Run every pair of the job to the end, at once; return the report (with its exit code)."""
    o = job.options
    tuning, sinks = o.tuning, o.sinks
    watcher = watcher or Watcher()
    run_id = uuid.uuid4().hex[:12]
    problems = Problems()
    lanes: list[_Lane] = []

    def stop_all(cause: Outcome) -> None:
        for lane in lanes:
            lane.engine.stop(cause)

    def interrupt_all(signum: int) -> None:
        for lane in lanes:
            lane.engine.interrupt(signum)

    budget = (
        Budget(o.max_errors, stop_all, missing_ok=o.missing_ok)
        if o.max_errors is not None
        else None
    )
    for pair, ids in job.groups.items():
        refused: Outcome | None = None
        try:
            action = make_action(pair)
        except Exception as err:  # that pair's set-up failed: it sends nothing
            action, refused = _no_action, _setup_failure(err, classify)
        stats = Stats()
        engine = new_engine(
            action,
            tuning,
            [stats, problems.subscriber(pair), *([budget] if budget else [])],
            limits=job.action.limits,
        )
        if refused is not None:
            engine.refuse(refused)
        engine.subscribers.extend(watcher.subscribers(pair, len(job.groups) > 1))
        lanes.append(_Lane(pair, ids, engine, stats, job.settled.get(pair)))

    writer: LedgerWriter | None = None
    ledger_error: str | None = None
    unrecorded: list[dict[str, object]] = []
    intents_recorded = True
    started = time.monotonic()
    trace = _open_trace(sinks.trace, started, watcher)
    if trace is not None:
        for lane in lanes:
            lane.engine.subscribers.append(trace.subscriber(lane.pair.label))
    with orderly_stops(interrupt_all):
        if sinks.ledger and not o.dry_run:
            try:
                writer = LedgerWriter(
                    sinks.ledger,
                    run_id,
                    job.action.name,
                    None,
                    tags=job.tags,
                    waits=job.waits,
                    on_error=lambda err: stop_all(
                        Outcome(Kind.UNREACHABLE, "LedgerUnwritable", f"the ledger failed: {err}")
                    ),
                )
                # Write-ahead: every intent is on disk as pending before the first call leaves.
                for lane in lanes:
                    writer.write_ahead(
                        lane.ids,
                        message=undo_note(job.undoes),
                        region=lane.pair.region,
                        account=lane.pair.account,
                        run_intents=job.total,
                    )
            except LedgerError as err:
                ledger_error = str(err)
                intents_recorded = False
            else:
                for lane in lanes:
                    lane.engine.subscribers.append(LedgerSubscriber(writer, lane.pair))
        if ledger_error is None:
            watcher.on_start([(lane.pair.label, lane.stats) for lane in lanes])
            try:
                # Whatever start-up made (see cli.main) is kept for good: never scan it again.
                gc.freeze()
                gc.enable()
                for lane in lanes:
                    lane.start()
                for lane in lanes:
                    while lane.thread.is_alive():  # a timed join lets signal handlers run
                        lane.thread.join(0.1)
            finally:
                watcher.on_end()
            for lane in lanes:
                if lane.crash is not None:
                    lane.settle_crash()
        else:
            for lane in lanes:
                lane.result.counts["pending"] = len(lane.ids)  # nothing was sent
        if trace is not None:
            trace.close()
            if trace.error is not None:
                # An aid, not the record: the run stands, but the file is not all of it.
                reason = trace.error.strerror or str(trace.error)
                watcher.on_no_trace(f"{trace.path} is cut short: {reason}")
        # Still under the handlers: a further signal cannot cut the last records short.
        if writer is not None:
            unrecorded = [asdict(r) for r in writer.close()]
    if writer is not None and writer.error is not None and ledger_error is None:
        ledger_error = (
            f"cannot write the ledger {writer.path}: {writer.error.strerror or writer.error}"
        )
    if ledger_error is not None:
        watcher.on_ledger_failed(ledger_error, any(la.stats.calls for la in lanes), unrecorded)

    for lane in lanes:
        crashed = lane.crashed
        if crashed is not None:
            watcher.on_lane_crashed(
                lane.pair.label,
                crashed.message or "",
                lane.result.counts["pending"],
                writer is not None,
            )
    signals = [la.result.signal for la in lanes if la.result.signal is not None]
    report = Report(
        run=run_id,
        action=job.action.name,
        dry_run=o.dry_run,
        endpoint=sinks.endpoint,
        window_profile=tuning.window.name,
        batch_size=tuning.batch_size,
        auto_batch=tuning.auto_batch,
        pairs=[_pair_report(lane) for lane in lanes],
        problems=problems.items,
        signal=signal_name(signals[0]) if signals else None,
        ledger=sinks.ledger if sinks.ledger and not o.dry_run else None,
        ledger_error=ledger_error,
        unrecorded=len(unrecorded),
        intents_recorded=intents_recorded,
        budget_spent=Reason.of(budget.spent) if budget else None,
        elapsed_seconds=time.monotonic() - started,
        done={lane.pair: lane.done for lane in lanes},
        ledger_started=writer.started if writer is not None else None,
        ledger_seq=writer.last_seq if writer is not None else 0,
    )
    report.exit_code = exit_code(report, missing_ok=o.missing_ok)
    return report


def _open_trace(path: str | None, started: float, watcher: Watcher) -> Trace | None:
    """The ``--trace`` file, or None; a trace that cannot be opened is a warning, not a stop."""
    if path is None:
        return None
    try:
        return Trace(path, started=started)
    except OSError as err:
        watcher.on_no_trace(str(err.strerror or err))
        return None


def _setup_failure(err: Exception, classify: Classify | None) -> Outcome:
    """Why a pair could not be set up; what nobody can classify stops that pair as fatal."""
    if classify is not None:
        with contextlib.suppress(Exception):
            return classify(err)
    return Outcome(Kind.FATAL, type(err).__name__, str(err))


def _pair_report(lane: _Lane) -> PairReport:
    r = lane.result
    row = PairReport(
        region=lane.pair.region,
        account=lane.pair.account,
        total=len(lane.ids),
        counts=dict(r.counts),
        fatal=Reason.of(r.fatal),
        stopped=Reason.of(r.stopped),
        gave_up=r.gave_up,
        crashed=Reason.of(lane.crashed),
    )
    return lane.stats.report(row)
