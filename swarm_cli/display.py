"""What a person sees: a live view on a terminal, plain lines in CI, and the summary."""

from __future__ import annotations

import threading
import time
from typing import Any, Literal, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from .report import Report
from .stats import Stats

ProgressMode = Literal["auto", "live", "plain", "none"]
SPARKS = "▁▂▃▄▅▆▇█"


class Progress(Protocol):
    def __enter__(self) -> Progress: ...
    def __exit__(self, *exc: object) -> None: ...


def sparkline(points: list[tuple[float, float]], width: int = 40) -> str:
    """The window over time, resampled to ``width`` columns."""
    if not points:
        return ""
    end = points[-1][0] or 1.0
    values, j = [], 0
    for col in range(width):
        t = end * col / max(1, width - 1)
        while j + 1 < len(points) and points[j + 1][0] <= t:
            j += 1
        values.append(points[j][1])
    top = max(values) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int(v / top * (len(SPARKS) - 1)))] for v in values)


def window_text(stats: Stats) -> str:
    """The window as a person reads it: a paced window is under one call in flight."""
    if stats.pace:
        return f"cwnd {stats.cwnd:.0f}, one call per {stats.pace:.2f}s"
    return f"cwnd {stats.cwnd:.0f}"


def status_line(stats: Stats, now: float | None = None) -> str:
    elapsed = stats.elapsed() if now is None or stats.started is None else now - stats.started
    line = (
        f"{stats.done}/{stats.total} done · {window_text(stats)} · in flight {stats.in_flight}"
        f" · calls {stats.calls} · throttled {stats.throttled_calls}"
        f" · failed {stats.failed + stats.missing}"
    )
    if stats.timeouts:
        line += f" · timed out {stats.timeouts}"
    line += f" · {elapsed:.1f}s"
    if stats.outage_since is not None:
        down = (now if now is not None else stats.last) - stats.outage_since
        line += f" · OUTAGE: no answer from the endpoint, probing ({down:.0f}s)"
    if stats.stopping:
        line += f" · stopping: {stats.stopping}"
    return line


Rows = list[tuple[str, Stats]]  # (pair label, its counters), one per window


class LiveView:
    """A rich Live view that reads the stats at each refresh: one block per window."""

    def __init__(self, console: Console, rows: Rows, title: str) -> None:
        self.rows = rows
        self.title = title
        self._live = Live(
            get_renderable=self._render, console=console, refresh_per_second=8, transient=False
        )

    def _render(self) -> Any:
        now = time.monotonic()
        blocks: list[Any] = []
        for label, s in self.rows:
            grid = Table.grid(padding=(0, 1))
            name = self.title if len(self.rows) == 1 else f"{self.title} {label}"
            grid.add_row(
                Text(name, style="bold"),
                ProgressBar(total=max(1, s.total), completed=s.done, width=40),
                Text(f"{s.done}/{s.total}"),
            )
            grid.add_row(
                Text("window", style="cyan"),
                Text(sparkline(s.trajectory), style="cyan"),
                Text(f"{window_text(s)} · peak {s.peak_cwnd:.0f}"),
            )
            blocks += [grid, Text(status_line(s, now), style="dim")]
        return Group(*blocks)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)


class PlainLines:
    """One line per window every ``interval`` seconds, for logs and CI."""

    def __init__(self, console: Console, rows: Rows, title: str, interval: float = 2.0) -> None:
        self.console = console
        self.rows = rows
        self.title = title
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="swarm-progress", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            for label, stats in self.rows:
                name = self.title if len(self.rows) == 1 else f"{self.title} {label}"
                self.console.print(f"{name}: {status_line(stats, now)}")

    def __enter__(self) -> PlainLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class NoProgress:
    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def choose_progress(mode: ProgressMode, console: Console, rows: Rows, title: str) -> Progress:
    """Chosen once: the run loop does not care which."""
    if mode == "auto":
        mode = "live" if console.is_terminal and not console.is_dumb_terminal else "plain"
    if mode == "live":
        return LiveView(console, rows, title)
    if mode == "plain":
        return PlainLines(console, rows, title)
    return NoProgress()


def render_summary(report: Report, console: Console) -> None:
    """The human summary of a run (its JSON twin is ``report.to_dict()``)."""
    c = report.counts
    verb = "would succeed" if report.dry_run else "succeeded"
    head = Text.assemble(
        (f"{report.action}: ", "bold"),
        (
            f"{c['succeeded']} of {report.total} {verb}",
            "green" if c["succeeded"] == report.total else "yellow",
        ),
        f" in {report.elapsed_seconds:.1f}s",
    )
    console.print(head)
    for row in report.pairs:
        w = row.window
        where = (
            f"  {row.pair.label}: {row.counts['succeeded']}/{row.total} · "
            if len(report.pairs) > 1
            else "  "
        )
        console.print(
            f"{where}calls {row.calls} · throttled {row.throttled_calls}"
            f" · retried {row.retries} · window peak {w.peak:.0f}, final {w.final:.0f}"
            f", {w.decreases} decreases",
        )
    for status in ("failed", "missing", "pending"):
        if c[status]:
            console.print(f"  {status}: {c[status]}", style="red")
    for item in report.problems[:20]:
        where = f"  {item.region}" if len(report.pairs) > 1 and item.region else ""
        console.print(
            f"    {item.id}{where}  {item.status}  {item.code or ''}  {item.message or ''}"
        )
    if len(report.problems) > 20:
        console.print(f"    … and {len(report.problems) - 20} more (see the ledger)")
    if report.fatal:
        console.print(f"  stopped: {report.fatal.code}: {report.fatal.message}", style="bold red")
    elif report.stopped:
        why = report.stopped
        console.print(f"  stopped early: {why.message or why.code}", style="yellow")
    if report.interrupted:
        console.print(
            f"  interrupted by {report.signal}: what was not done is recorded as pending",
            style="yellow",
        )
    timeouts = report.total_of("timeouts")
    if timeouts:
        console.print(f"  calls given up for want of an answer: {timeouts}")
    if report.ledger_error:
        console.print(f"  ledger NOT fully written: {report.ledger_error}", style="bold red")
    if report.ledger:
        console.print(f"  ledger: {report.ledger}")
        if c["failed"] + c["pending"]:
            console.print(
                f"  retry the rest: swarm {report.action} --ids "
                f"<(swarm ledger failed --action {report.action} {report.ledger})"
                if report.action != "terminate"
                else f"  retry the rest: swarm terminate --ids "
                f"<(swarm ledger failed {report.ledger})"
            )
