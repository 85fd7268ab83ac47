from __future__ import annotations

import io
import time

from rich.console import Console

from swarm_cli.display import (
    LiveView,
    NoProgress,
    PlainLines,
    choose_progress,
    render_summary,
    sparkline,
    status_line,
)
from swarm_cli.engine import Event
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.report import PairReport, Problem, Report, WindowReport
from swarm_cli.stats import Stats


def console(terminal: bool = False) -> Console:
    return Console(
        file=io.StringIO(),
        width=100,
        force_terminal=terminal,
        soft_wrap=True,
        highlight=False,
        color_system=None,
    )


def fed_stats() -> Stats:
    stats = Stats()
    stats(Event("queued", 10.0, ids=("i-00000001", "i-00000002", "i-00000003"), cwnd=1))
    stats(Event("sent", 10.0, ids=("i-00000001",), cwnd=1, in_flight=1))
    stats(Event("succeeded", 10.5, ids=("i-00000001",), cwnd=2, in_flight=0))
    stats(Event("window", 10.5, cwnd=2, ssthresh=16))
    stats(Event("throttled", 11.0, ids=("i-00000002",), cwnd=1, in_flight=0))
    stats(Event("window", 11.0, cwnd=1, ssthresh=1, pace=0.25))
    stats(
        Event(
            "failed",
            12.0,
            ids=("i-00000003",),
            cwnd=1,
            pace=0.25,
            attempts=1,
            outcome=Outcome(Kind.PERMANENT, "OperationNotPermitted", "protected"),
        )
    )
    return stats


def test_sparkline_resamples_the_window_over_time() -> None:
    assert sparkline([(0, 1), (1, 2), (2, 4), (3, 8)], width=4) == "▁▂▄█"
    assert sparkline([(0, 4), (3, 4)], width=3) == "███"
    assert sparkline([]) == ""


def test_stats_count_events_and_keep_the_trajectory() -> None:
    stats = fed_stats()
    assert (stats.total, stats.done, stats.calls, stats.throttled_calls) == (3, 2, 1, 1)
    assert stats.window_decreases == 1
    assert stats.trajectory == [(0.0, 1), (0.5, 2), (1.0, 1)]
    assert stats.errors == {"OperationNotPermitted": 1}
    row = stats.report(PairReport("us-east-1"))
    assert row.window.pace_seconds == 0.25 and row.calls == 1 and row.window.peak == 2


def test_status_line_shows_a_paced_window() -> None:
    line = status_line(fed_stats(), now=13.0)
    assert line == (
        "2/3 done · cwnd 1, one call per 0.25s · in flight 0 · calls 1"
        " · throttled 1 · failed 1 · 3.0s"
    )


def test_live_view_renders_progress_and_window() -> None:
    out = console(terminal=True)
    view = LiveView(out, [("us-east-1", fed_stats())], "terminate")
    out.print(view._render())
    screen = out.file.getvalue()  # type: ignore[attr-defined]
    assert "terminate" in screen and "2/3" in screen
    assert "one call per 0.25s · peak 2" in screen


def test_progress_is_chosen_once_by_the_console() -> None:
    rows = [("us-east-1", Stats())]
    assert isinstance(choose_progress("auto", console(terminal=True), rows, "t"), LiveView)
    assert isinstance(choose_progress("auto", console(), rows, "t"), PlainLines)
    assert isinstance(choose_progress("none", console(terminal=True), rows, "t"), NoProgress)


def test_plain_lines_print_until_closed() -> None:
    out = console()
    with PlainLines(out, [("us-east-1", fed_stats())], "terminate", interval=0.01):
        deadline = time.monotonic() + 10
        while not out.file.getvalue() and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines and all(line.startswith("terminate: 2/3 done") for line in lines)


def test_summary_names_failures_and_the_retry_command() -> None:
    report = Report(
        run="r",
        action="terminate",
        pairs=[
            PairReport(
                "us-east-1",
                total=3,
                counts={"succeeded": 2, "failed": 1, "missing": 0, "pending": 0},
                calls=5,
                throttled_calls=1,
                window=WindowReport(final=2, peak=4, decreases=1),
            )
        ],
        problems=[Problem("i-00000003", "failed", "OperationNotPermitted", "protected")],
        ledger="l.jsonl",
        elapsed_seconds=2.0,
    )
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "terminate: 2 of 3 succeeded in 2.0s" in text
    assert "i-00000003  failed  OperationNotPermitted  protected" in text
    assert "swarm terminate --ids <(swarm ledger failed l.jsonl)" in text


def test_summary_of_several_pairs_has_a_row_each() -> None:
    def row(region: str, account: str, done: int) -> PairReport:
        counts = {"succeeded": done, "failed": 0, "missing": 0, "pending": 0}
        return PairReport(region, account, total=done, counts=counts, calls=done)

    report = Report(
        run="r",
        action="stop",
        pairs=[row("us-east-1", "111111111111", 4), row("eu-west-1", "222222222222", 6)],
    )
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "stop: 10 of 10 succeeded" in text
    assert "111111111111/us-east-1: 4/4 · calls 4" in text
    assert "222222222222/eu-west-1: 6/6 · calls 6" in text
    assert report.to_dict()["window"] is None and len(report.to_dict()["pairs"]) == 2
