"""One run: the engine wired to the ledger, the stats and the progress view."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from .display import ProgressMode, choose_progress
from .engine import RESOLVED, Action, Engine, Event, RunResult
from .ledger import LedgerWriter
from .stats import Stats
from .window import ADAPTIVE, Window, WindowProfile

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED, EXIT_AUTH, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


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


def exit_code(result: RunResult) -> int:
    if result.fatal is not None:
        return EXIT_AUTH
    if result.interrupted:
        return EXIT_INTERRUPTED
    c = result.counts
    return EXIT_FAILED if c["failed"] + c["missing"] + c["pending"] else EXIT_OK


def execute(
    ids: Sequence[str], action: Action, options: RunOptions, console: Console
) -> tuple[dict[str, Any], int]:
    """Run the intents to the end; return the report and the exit code."""
    run_id = uuid.uuid4().hex[:12]
    stats, problems = Stats(), Problems()
    subscribers: list[Any] = [stats, problems]
    writer = None
    if options.ledger and not options.dry_run:
        writer = LedgerWriter(options.ledger, run_id, options.action, options.region)
        subscribers.append(LedgerSubscriber(writer))
    window = Window(options.window)
    engine = Engine(
        action,
        window,
        batch_size=options.batch_size,
        max_attempts=options.max_attempts,
        subscribers=subscribers,
    )
    try:
        with choose_progress(options.progress, console, stats, options.title):
            result = engine.run(ids)
    finally:
        if writer is not None:
            writer.close()
    code = exit_code(result)
    report: dict[str, Any] = {
        "run": run_id,
        "action": options.action,
        "dry_run": options.dry_run,
        "region": options.region,
        "endpoint": options.endpoint,
        "window_profile": options.window.name,
        "batch_size": options.batch_size,
        **stats.as_dict(),
        "counts": dict(result.counts),
        "problems": problems.items,
        "fatal": None
        if result.fatal is None
        else {"code": result.fatal.code, "message": result.fatal.message},
        "interrupted": result.interrupted,
        "ledger": writer.path if writer else None,
        "exit_code": code,
    }
    return report, code
