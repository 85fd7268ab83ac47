"""One run: the engine wired to the ledger, the stats, the progress view and the signals."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console

from .display import ProgressMode, choose_progress
from .engine import RESOLVED, Action, Engine, Event, RunResult, signal_name
from .ledger import LedgerError, LedgerWriter
from .outage import Outage
from .outcome import Kind, Outcome
from .rto import FixedTimeout, Rto
from .stats import Stats
from .window import ADAPTIVE, Window, WindowProfile

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED, EXIT_AUTH = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT; other signals give 128 + their number
EXIT_LEDGER = 74  # sysexits.h's EX_IOERR: the ledger could not be written
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class RunOptions:
    action: str = "terminate"
    region: str | None = None
    endpoint: str | None = None
    dry_run: bool = False
    batch_size: int = 10
    max_attempts: int = 5
    window: WindowProfile = ADAPTIVE
    ledger: str | None = None
    progress: ProgressMode = "auto"
    title: str = "terminate"
    drain_timeout: float = 3.0
    call_timeout: float | None = None  # None: follow the endpoint's measured round trips
    max_outage: float = 45.0
    missing_ok: bool = False


class LedgerSubscriber:
    def __init__(self, writer: LedgerWriter) -> None:
        self.writer = writer

    def __call__(self, event: Event) -> None:
        if event.type not in RESOLVED:
            return
        o = event.outcome
        self.writer.write(
            event.ids[0],
            event.type,
            attempts=event.attempts,
            code=o.code if o else None,
            message=o.message if o else None,
            http_status=o.http_status if o else None,
            request_id=o.request_id if o else None,
        )


class Problems:
    """Every intent that did not succeed, for the summary."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def __call__(self, event: Event) -> None:
        if event.type in RESOLVED and event.type != "succeeded":
            o = event.outcome
            self.items.append(
                {
                    "id": event.ids[0],
                    "status": event.type,
                    "code": o.code if o else None,
                    "message": o.message if o else None,
                }
            )


def exit_code(result: RunResult, *, ledger_failed: bool = False, missing_ok: bool = False) -> int:
    if ledger_failed:
        return EXIT_LEDGER
    if result.fatal is not None:
        return EXIT_AUTH
    if result.signal is not None:
        return 128 + result.signal
    c = result.counts
    left = c["failed"] + c["pending"] + (0 if missing_ok else c["missing"])
    return EXIT_FAILED if left else EXIT_OK


@contextlib.contextmanager
def orderly_stops(stop: Callable[[int], None]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP call ``stop(signum)`` instead of killing the process.

    The handler only records the signal; the dispatcher sees it within its poll
    interval, so no signal can land between two steps of the engine's bookkeeping.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, lambda signum, frame: stop(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def execute(
    ids: Sequence[str], action: Action, options: RunOptions, console: Console
) -> tuple[dict[str, Any], int]:
    """Run the intents to the end; return the report and the exit code."""
    run_id = uuid.uuid4().hex[:12]
    stats, problems = Stats(), Problems()
    window = Window(options.window)
    engine = Engine(
        action,
        window,
        batch_size=options.batch_size,
        max_attempts=options.max_attempts,
        subscribers=[stats, problems],
        timeouts=Rto() if options.call_timeout is None else FixedTimeout(options.call_timeout),
        outage=Outage(max_outage=options.max_outage),
        drain_timeout=options.drain_timeout,
    )
    writer = None
    ledger_error: str | None = None
    unrecorded: list[dict[str, Any]] = []
    result = RunResult()
    with orderly_stops(engine.interrupt):
        if options.ledger and not options.dry_run:
            try:
                writer = LedgerWriter(
                    options.ledger,
                    run_id,
                    options.action,
                    options.region,
                    on_error=lambda err: engine.stop(
                        Outcome(Kind.UNREACHABLE, "LedgerUnwritable", f"the ledger failed: {err}")
                    ),
                )
                # Write-ahead: every intent is on disk as pending before the first call leaves.
                writer.write_ahead(ids)
            except LedgerError as err:
                ledger_error = str(err)
                result.counts["pending"] = len(ids)  # nothing was sent
            else:
                engine.subscribers.append(LedgerSubscriber(writer))
        if ledger_error is None:
            with choose_progress(options.progress, console, stats, options.title):
                result = engine.run(ids)
        # Still under the handlers: a further signal cannot cut the last records short.
        if writer is not None:
            unrecorded = [asdict(r) for r in writer.close()]
    if writer is not None and writer.error is not None and ledger_error is None:
        ledger_error = (
            f"cannot write the ledger {writer.path}: {writer.error.strerror or writer.error}"
        )
    if ledger_error is not None:
        sent = "no more calls were sent" if stats.calls else "nothing was sent"
        console.print(f"[bold red]error:[/] {ledger_error}; {sent}")
        if unrecorded:
            console.print(
                f"{len(unrecorded)} outcome(s) could not be recorded; here they are as "
                "ledger lines (keep them):"
            )
            for record in unrecorded:
                console.out(json.dumps(record, sort_keys=True), highlight=False)
    code = exit_code(result, ledger_failed=ledger_error is not None, missing_ok=options.missing_ok)
    stopped = result.stopped
    report: dict[str, Any] = {
        "run": run_id,
        "action": options.action,
        "dry_run": options.dry_run,
        "region": options.region,
        "endpoint": options.endpoint,
        "window_profile": options.window.name,
        "batch_size": options.batch_size,
        **stats.as_dict(),
        "total": len(ids),
        "counts": dict(result.counts),
        "problems": problems.items,
        "fatal": None
        if result.fatal is None
        else {"code": result.fatal.code, "message": result.fatal.message},
        "stopped": None if stopped is None else {"code": stopped.code, "message": stopped.message},
        "interrupted": result.interrupted,
        "signal": None if result.signal is None else signal_name(result.signal),
        "gave_up": result.gave_up,
        "ledger": options.ledger if options.ledger and not options.dry_run else None,
        "ledger_error": ledger_error,
        "unrecorded": len(unrecorded),
        "exit_code": code,
    }
    return report, code
