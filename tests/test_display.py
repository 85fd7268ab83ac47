from __future__ import annotations

import io
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from swarm_cli.display import (
    LiveView,
    NoProgress,
    PlainLines,
    choose_progress,
    fall_text,
    recent_rate,
    render_summary,
    sparkline,
    status_line,
    total_line,
    window_chart,
    window_text,
)
from swarm_cli.events import EVENT_TYPES, EventType
from swarm_cli.events import Event as AnyEvent
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.report import PairReport, Problem, Reason, Report, Sample, WindowReport
from swarm_cli.stats import MAX_SAMPLES, Fall, RateWatch, Stats


def Event(type_: EventType, at: float, **fields: object) -> AnyEvent:
    """An event by its name, as the engine would raise it."""
    return EVENT_TYPES[type_](at, **fields)  # type: ignore[arg-type]


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
        "2/3 done · 1 allowed in flight, one call per 0.25s · 0 in flight · calls 1"
        " · throttled 1 · failed 1 · 3.0s"
    )


def test_a_fast_pace_reads_as_calls_a_second() -> None:
    # A pace of 2 ms printed to two decimals read "one call per 0.00s".
    fast = replace(fed_stats().snapshot(), cwnd=500, pace=0.002)
    assert window_text(fast) == "500 allowed in flight, up to 500 calls a second"
    assert window_text(replace(fast, pace=0.0)) == "500 allowed in flight"
    assert window_text(replace(fast, pace=0.01)) == "500 allowed in flight, one call per 0.01s"


def test_status_line_tells_missing_from_failed() -> None:
    stats = fed_stats()
    stats(Event("missing", 12.5, ids=("i-00000002",), cwnd=1, pace=0.25, attempts=2))
    line = status_line(stats, now=13.0)
    assert " · failed 1 · missing 1 · " in line


def test_live_view_renders_progress_and_window() -> None:
    out = console(terminal=True)
    view = LiveView(out, [("us-east-1", fed_stats())], "terminate")
    out.print(view.render(now=13.0))
    screen = out.file.getvalue()  # type: ignore[attr-defined]
    assert "terminate" in screen and "2/3 done" in screen
    assert "1 allowed in flight, one call per 0.25s" in screen and "peak 2 allowed" in screen
    assert "cwnd" not in screen and "ssthresh" not in screen


# A recorded run, one call every half second: (second, cwnd, what the call did).
# Slow start to 8, a throttle halves it, avoidance back to 8, a second throttle.
SCRIPT = [
    *((k / 2, float(k), "succeeded") for k in range(1, 9)),
    (4.5, 8.0, "throttled"),
    (5.0, 4.0, "succeeded"),
    (5.5, 4.0, "succeeded"),
    (6.0, 5.0, "failed"),
    (6.5, 5.0, "succeeded"),
    (7.0, 6.0, "retried"),
    (7.5, 6.0, "succeeded"),
    (8.0, 7.0, "timed_out"),
    (8.5, 7.0, "succeeded"),
    (9.0, 8.0, "throttled"),
    (9.5, 4.0, "succeeded"),
]
CODES = {
    "throttled": "RequestLimitExceeded",
    "failed": "IncorrectInstanceState",
    "retried": "InternalError",
    "timed_out": "CallTimeout",
}


def recorded_run() -> Stats:
    stats = Stats()
    ids = iter(f"i-{n:08d}" for n in range(20))
    stats(Event("queued", 0.0, ids=tuple(f"i-{n:08d}" for n in range(20)), cwnd=1, ssthresh=8))
    for at, cwnd, what in SCRIPT:
        phase = "slow-start" if at < 4 else "avoidance"
        i = (next(ids),)
        shared = {"cwnd": cwnd, "ssthresh": 8.0 if at < 4.5 else 4.0, "phase": phase}
        outcome = Outcome(Kind.TRANSIENT, CODES[what]) if what in CODES else None
        stats(Event("sent", at, ids=i, in_flight=int(cwnd), **shared))  # type: ignore[arg-type]
        stats(Event("answered", at, ids=i, in_flight=int(cwnd) - 1, latency=0.4, **shared))  # type: ignore[arg-type]
        if what == "throttled":
            stats(Event("throttled", at, ids=i, outcome=outcome, in_flight=3, **shared))  # type: ignore[arg-type]
            stats(Event("window", at, cwnd=4.0, ssthresh=4.0, in_flight=3, phase="recovery"))
        elif what in ("succeeded", "failed"):
            stats(Event(what, at, ids=i, outcome=outcome, in_flight=3, **shared))  # type: ignore[arg-type]
        else:
            stats(Event(what, at, ids=i, outcome=outcome, in_flight=3, **shared))  # type: ignore[arg-type]
    return stats


def screen_of(view: LiveView, now: float, out: Console) -> list[str]:
    out.print(view.render(now=now))
    return out.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_live_view_of_a_recorded_run_at_a_fixed_width() -> None:
    out = Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)
    view = LiveView(
        out,
        [("us-east-1", recorded_run())],
        "terminate",
        endpoint="http://127.0.0.1:4566",
        badges=("DRY RUN", "SANDBOX"),
        batch=10,
        bound_rate=20,
    )
    lines = screen_of(view, 10.0, out)
    assert lines[0].startswith("swarm terminate · us-east-1 · http://127.0.0.1:4566")
    assert " DRY RUN " in lines[0] and " SANDBOX " in lines[0]
    assert lines[1].startswith("15/20 done (75%) · 10s")
    # The legend, in words, under the header; the controller's terms never appear.
    assert (
        lines[2]
        == "allowed in flight = calls swarm may send at once · in flight = awaiting answers"
    )
    assert not any(w in "\n".join(lines) for w in ("cwnd", "ssthresh", "avoidance"))
    lines = lines[:2] + lines[3:]
    assert "15/20 done 75%" in lines[2]
    assert (
        "growing while answers come · 4 allowed in flight · 3 in flight · batch 10 · "
        "peak 8 allowed" in lines[3]
    )
    # 6 done in the last 5 s (9 then, 15 now); 5 left at that pace.
    assert lines[4] == "  rate 1.2/s of 20/s bound · ETA 4s"
    chart = lines[5:8]
    assert chart[0].startswith("    8┤") and all(row[5] == "│" for row in chart[1:])
    assert {c for row in chart for c in row[6:]} - {" "} <= {chr(c) for c in range(0x2801, 0x2900)}
    marks = lines[8]
    # 86 columns over 10 s: the throttles at 4.5 s and 9 s fall in columns 38 and 77.
    assert marks.startswith("     └") and marks.endswith("10s")
    assert marks.count("^") == 2
    assert (marks.index("^") - 6, marks.rindex("^") - 6) == (38, 77)
    counters = " ".join(lines[9:11])
    for counter in (
        "succeeded 14",
        "failed 1",
        "missing 0",
        "calls 19",
        "throttled 2",
        "error retries 1",
        "timed out 1",
    ):
        assert counter in counters
    assert (
        lines[-1] == "  errors: RequestLimitExceeded 2 · CallTimeout 1 · IncorrectInstanceState 1"
    )


def test_live_view_fits_width_80() -> None:
    out = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    lines = screen_of(LiveView(out, [("us-east-1", recorded_run())], "terminate"), 10.0, out)
    assert all(len(line) <= 80 for line in lines)
    assert "…" not in lines[2]  # the legend is whole
    assert sum("^" in line and "└" in line for line in lines) == 1


def test_interrupted_view_shows_what_was_done_not_all() -> None:
    stats = Stats()
    stats(Event("queued", 0.0, ids=("i-1", "i-2", "i-3", "i-4"), cwnd=1))
    stats(Event("succeeded", 1.0, ids=("i-1",), cwnd=2))
    stopped = Outcome(Kind.UNREACHABLE, "Interrupted", "stopped by SIGINT before an answer")
    stats(Event("stopping", 1.5, outcome=stopped, cwnd=2))
    for i in ("i-2", "i-3", "i-4"):
        stats(Event("pending", 2.0, ids=(i,), outcome=stopped, cwnd=2))
    out = console(terminal=True)
    screen = "\n".join(screen_of(LiveView(out, [("us-east-1", stats)], "stop"), 60.0, out))
    assert "1/4 done 25%" in screen and "100%" not in screen
    assert "pending 3" in screen and "stopping: stopped by SIGINT" in screen
    assert "ETA" not in screen


def test_several_pairs_are_capped_with_the_rest_summed() -> None:
    rows = [(f"11111111111{n % 10}/region-{n}", recorded_run()) for n in range(10)]
    out = Console(file=io.StringIO(), width=100, height=200, force_terminal=True, color_system=None)
    screen = "\n".join(screen_of(LiveView(out, rows, "stop", already_done=7), 10.0, out))
    assert "swarm stop · 10 pairs in region-0, region-1, region-2, region-3 +6" in screen
    assert "150/200 done (75%)" in screen and "7 already done per the ledger" in screen
    assert screen.count("done 75%") == 8
    assert "… and 2 more: 30/40 done · throttled 4 · failed 2" in screen


def test_chart_draws_the_window_as_a_line_over_the_calls_in_flight() -> None:
    flat = [Sample(0.0, 4.0, 0, 0, 0)]
    assert window_chart(flat, 1.0, width=2, height=1).rows == ["⠉⠉"]  # top dots only
    full = [Sample(0.0, 4.0, 4, 0, 0)]
    assert window_chart(full, 1.0, width=2, height=1).rows == ["⣿⣿"]
    # A halving inside a column shows as a drop from the top dot to the second from the bottom.
    drop = [Sample(0.0, 4.0, 0, 0, 0), Sample(1.0, 2.0, 0, 0, 0)]
    assert window_chart(drop, 2.0, width=2, height=1).rows == ["⠹⠤"]


def test_chart_marks_throttles_in_their_columns() -> None:
    series = [
        Sample(0.0, 1.0, 1, 0, 0),
        Sample(3.0, 4.0, 4, 3, 1),
        Sample(3.0, 2.0, 2, 3, 1),
        Sample(7.0, 5.0, 5, 8, 3),
    ]
    chart = window_chart(series, 10.0, width=10, height=2)
    assert chart.marks == "  ^   ^   "
    assert chart.top == 5.0 and len(chart.rows) == 2


def test_rate_is_what_was_done_over_the_last_seconds() -> None:
    stats = Stats()
    stats(Event("queued", 100.0, ids=tuple(f"i-{n}" for n in range(50)), cwnd=1))
    for n in range(40):  # one a quarter second for ten seconds
        at = 100.0 + (n + 1) / 4
        stats(Event("answered", at, cwnd=1))
        stats(Event("succeeded", at, ids=(f"i-{n}",), cwnd=1))
    snap = stats.snapshot()
    assert recent_rate(snap, 10.0) == pytest.approx(4.0)
    assert recent_rate(snap, 20.0) == pytest.approx(0.0)  # stalled: nothing for 10 s
    assert recent_rate(snap, 0.5) is None


def test_snapshot_is_a_frozen_copy() -> None:
    stats = recorded_run()
    snap = stats.snapshot()
    stats(Event("succeeded", 11.0, ids=("i-00000019",), cwnd=5))
    assert snap.done == 15 and stats.done == 16
    assert snap.codes == {
        "RequestLimitExceeded": 2,
        "IncorrectInstanceState": 1,
        "InternalError": 1,
        "CallTimeout": 1,
    }
    assert snap.errors == {"IncorrectInstanceState": 1}  # the report's errors: outcomes only


def test_rendering_while_a_worker_feeds_events_is_safe() -> None:
    stats = Stats()
    total = 6000
    stats(Event("queued", 0.0, ids=tuple(f"i-{n}" for n in range(total)), cwnd=1))
    errors: list[BaseException] = []

    def feed() -> None:
        try:
            for n in range(total):
                at = n * 0.01
                cwnd = float(n % 37 + 1)
                stats(Event("answered", at, cwnd=cwnd, in_flight=n % 37))
                if n % 37 == 36:
                    throttle = Outcome(Kind.THROTTLED, "RequestLimitExceeded")
                    stats(Event("throttled", at, outcome=throttle, cwnd=cwnd))
                    stats(Event("window", at, cwnd=cwnd / 2, ssthresh=cwnd / 2))
                stats(Event("succeeded", at, ids=(f"i-{n}",), cwnd=cwnd))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    worker = threading.Thread(target=feed)
    out = Console(file=io.StringIO(), width=100, force_terminal=True)
    view = LiveView(out, [("us-east-1", stats)], "terminate")
    worker.start()
    for k in range(200):
        snap = stats.snapshot()
        assert snap.done <= snap.total and len(snap.series) <= MAX_SAMPLES
        out.print(view.render(now=k * 0.3))
    worker.join()
    assert not errors
    out.print(view.render(now=61.0))
    assert f"{total}/{total} done" in out.file.getvalue()  # type: ignore[attr-defined]


def test_progress_is_chosen_once_by_the_console() -> None:
    rows = [("us-east-1", Stats())]
    assert isinstance(choose_progress("auto", console(terminal=True), rows, "t"), LiveView)
    assert isinstance(choose_progress("auto", console(), rows, "t"), PlainLines)
    assert isinstance(choose_progress("none", console(terminal=True), rows, "t"), NoProgress)


def test_plain_line_interval_comes_from_the_flag_then_the_environment() -> None:
    rows = [("us-east-1", Stats())]

    def interval(**kw: object) -> float:
        progress = choose_progress("plain", console(), rows, "t", **kw)  # type: ignore[arg-type]
        assert isinstance(progress, PlainLines)
        return progress.interval

    assert interval(env={}) == 2.0
    assert interval(env={"SWARM_PROGRESS_INTERVAL": "30"}) == 30.0
    assert interval(interval=0.5, env={"SWARM_PROGRESS_INTERVAL": "30"}) == 0.5
    assert interval(env={"SWARM_PROGRESS_INTERVAL": "soon"}) == 2.0
    assert interval(env={"SWARM_PROGRESS_INTERVAL": "-1"}) == 2.0
    assert interval(env={"SWARM_PROGRESS_INTERVAL": "inf"}) == 2.0


def test_a_progress_interval_that_is_no_number_of_seconds_is_said_not_used() -> None:
    from swarm_cli import display

    rows = [("us-east-1", Stats())]
    display._said_of.clear()
    for value, said in (("soon", True), ("-1", True), ("", False), (" ", False), ("5", False)):
        out = console()
        choose_progress("plain", out, rows, "t", env={"SWARM_PROGRESS_INTERVAL": value})
        text = out.file.getvalue()  # type: ignore[attr-defined]
        assert ("SWARM_PROGRESS_INTERVAL" in text) is said, (value, text)
        if said:
            assert f"{value!r} is not a finite number of seconds above 0: a line every 2 s" in (
                text
            )
        # A command showing several views (the run, its wait, its rollback) says it once.
        again = console()
        choose_progress("plain", again, rows, "t", env={"SWARM_PROGRESS_INTERVAL": value})
        assert "SWARM_PROGRESS_INTERVAL" not in again.file.getvalue()  # type: ignore[attr-defined]


def lines_from(progress: PlainLines, out: Console, count: int) -> list[str]:
    with progress:
        deadline = time.monotonic() + 10
        while (
            len(out.file.getvalue().splitlines()) < count  # type: ignore[attr-defined]
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
    return out.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_plain_lines_are_one_total_per_tick_and_pairs_with_detail() -> None:
    out = console()
    rows = [(f"{n:012d}/us-east-1", fed_stats()) for n in range(1, 101)]  # 100 pairs
    lines = lines_from(PlainLines(out, rows, "stop", interval=0.01), out, 3)
    assert len(lines) >= 3
    assert all(
        line.startswith("stop: 200/300 done (66%) · 100 pairs, 0 finished · 0 in flight")
        for line in lines
    )
    assert all("calls 100 · throttled 100 · failed 100" in line for line in lines)
    # --verbose: each tick's total, then a line per pair.
    out = console()
    rows = rows[:2]
    lines = lines_from(PlainLines(out, rows, "stop", interval=0.01, detail=True), out, 6)
    assert lines[0].startswith("stop: 4/6 done (66%) · 2 pairs")
    assert lines[1].startswith("  000000000001/us-east-1: 2/3 done · 1 allowed in flight")
    assert lines[2].startswith("  000000000002/us-east-1: 2/3 done")
    assert lines[3].startswith("stop: 4/6 done")


SGR = re.compile(r"\x1b\[([0-9;]*)m")


def colour_codes(text: str) -> list[str]:
    """The colour parameters of the SGR escapes in ``text`` (bold and the like are not)."""
    params = [p for match in SGR.findall(text) for p in match.split(";") if p]
    return [p for p in params if len(p) > 1 and p[0] in "349"]


def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor")
    assert plain.no_color
    lines = lines_from(
        PlainLines(plain, [("us-east-1", fed_stats())], "t", interval=0.01), plain, 1
    )
    assert lines and "\x1b" not in "\n".join(lines)
    live = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="truecolor")
    view = LiveView(live, [("us-east-1", recorded_run())], "terminate", badges=("SANDBOX",))
    screen = "\n".join(screen_of(view, 10.0, live))
    assert "SANDBOX" in screen and colour_codes(screen) == []
    monkeypatch.delenv("NO_COLOR")
    coloured = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="truecolor")
    assert colour_codes("\n".join(screen_of(view, 10.0, coloured))) != []  # the check can fail


def test_plain_lines_print_until_closed() -> None:
    out = console()
    with PlainLines(out, [("us-east-1", fed_stats())], "terminate", interval=0.01):
        deadline = time.monotonic() + 10
        while not out.file.getvalue() and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines and all(line.startswith("terminate: 2/3 done") for line in lines)


def test_summary_names_each_problems_account_and_region_across_accounts() -> None:
    accounts = ("111111111111", "222222222222")
    counts = {"succeeded": 0, "failed": 0, "missing": 0, "pending": 1}
    report = Report(
        run="r",
        action="terminate",
        pairs=[PairReport("eu-west-1", a, total=1, counts=dict(counts)) for a in accounts],
        problems=[
            Problem(f"i-0000000{n}", "pending", "CallTimeout", "no answer", "eu-west-1", a)
            for n, a in enumerate(accounts, 1)
        ],
        elapsed_seconds=1.0,
    )
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "i-00000001  111111111111/eu-west-1  pending  CallTimeout" in text
    assert "i-00000002  222222222222/eu-west-1  pending  CallTimeout" in text


def test_problems_past_twenty_are_sent_where_they_all_are() -> None:
    counts = {"succeeded": 0, "failed": 0, "missing": 0, "pending": 25}
    problems = [Problem(f"i-{n:08d}", "pending", "Interrupted", "stopped") for n in range(25)]
    report = Report(
        run="r",
        action="terminate",
        pairs=[PairReport("eu-west-1", total=25, counts=counts)],
        problems=problems,
        ledger="l.jsonl",
        elapsed_seconds=1.0,
    )
    said = []
    for ledger_error in (None, "No space left on device"):
        out = console()
        render_summary(replace(report, ledger_error=ledger_error), out)
        said.append(out.file.getvalue())  # type: ignore[attr-defined]
    assert "… and 5 more (see the ledger l.jsonl)" in said[0]
    # The ledger that failed does not hold them: not sent there.
    assert "… and 5 more (--output json lists all; the ledger could not hold every one)" in said[1]


def test_summary_names_failures_and_the_retry_command(tmp_path: Path) -> None:
    report = Report(
        run="r",
        action="terminate",
        pairs=[
            PairReport(
                "us-east-1",
                total=4,
                counts={"succeeded": 2, "failed": 1, "missing": 0, "pending": 1},
                calls=5,
                throttled_calls=1,
                window=WindowReport(final=2, peak=4, decreases=1),
            )
        ],
        problems=[
            Problem("i-00000003", "failed", "OperationNotPermitted", "protected"),
            Problem("i-00000004", "pending", "CallTimeout", "no answer within 3.0s"),
        ],
        ledger="l.jsonl",
        elapsed_seconds=2.0,
    )
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "terminate: 2 of 4 succeeded in 2.0s" in text
    assert "i-00000003  failed  OperationNotPermitted  protected" in text
    # The protected one is not retried forever; the unanswered one is.
    assert "failed permanently: 1 (1 OperationNotPermitted); a retry fails again" in text
    # Copied as is into a CI step: the same ledger, and no prompt.
    retry = (
        "swarm ledger failed --retryable --action terminate l.jsonl >l.jsonl.left && "
        "swarm terminate --yes --ledger l.jsonl --ids l.jsonl.left --resume"
    )
    assert retry in text
    assert "once the ledger can be written again" not in text
    # A disk that took no more: the list and the retry's records need room first.
    out = console()
    render_summary(replace(report, ledger_error="No space left on device"), out)
    said = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert (
        "once the ledger can be written again (see why above; or copy it to a disk that takes "
        "it and use that path in the command below), retry the rest: swarm ledger failed" in said
    )
    # No such file here (a disk that refused its first line has it removed): not named
    # as if it held the run.
    assert "ledger: l.jsonl (none written)" in text
    # The list is named after the ledger, never another file; a path starting with -
    # is no option.
    named = replace(report, ledger="-odd.jsonl")
    out = console()
    render_summary(named, out)
    said = out.file.getvalue()  # type: ignore[attr-defined]
    assert "terminate ./-odd.jsonl >./-odd.jsonl.left && " in said
    assert "--ledger ./-odd.jsonl --ids ./-odd.jsonl.left" in said
    kept = tmp_path / "kept.jsonl"
    kept.write_text("")
    out = console()
    render_summary(replace(report, ledger=str(kept)), out)
    said = out.file.getvalue()  # type: ignore[attr-defined]
    assert f"ledger: {kept}\n" in said
    # A run its failure budget rolled back leaves nothing to retry.
    report.extra["rollback"] = {
        "action": "start",
        "total": 2,
        "counts": {"succeeded": 2, "failed": 0, "missing": 0, "pending": 0},
    }
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "rollback (start): 2 of 2 undone" in text and "retry the rest" not in text
    assert "rollback's wait" not in text
    # With --wait, the undo's instances are waited for: said under it.
    report.extra["rollback"]["wait"] = {"target": "running", "reached": 1, "timed_out": 1}
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "rollback's wait for running: 1 reached, 1 timed out" in text


def test_summary_of_several_pairs_has_a_row_each() -> None:
    def row(region: str, account: str, done: int) -> PairReport:
        counts = {"succeeded": done, "failed": 0, "missing": 0, "pending": 0}
        return PairReport(region, account, total=done, counts=counts, calls=done, retries=done)

    report = Report(
        run="r",
        action="stop",
        pairs=[row("us-east-1", "111111111111", 4), row("eu-west-1", "222222222222", 6)],
    )
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "stop: 10 of 10 succeeded" in text
    assert "111111111111/us-east-1: 4/4 · calls 4 · throttled 0 · error retries 4 ·" in text
    assert "222222222222/eu-west-1: 6/6 · calls 6" in text
    assert report.to_dict()["window"] is None and len(report.to_dict()["pairs"]) == 2


def test_a_stop_in_several_pairs_names_the_pairs_it_came_from() -> None:
    def row(region: str, account: str, fatal: Reason | None = None) -> PairReport:
        counts = {"succeeded": 1, "failed": 0, "missing": 0, "pending": 0}
        return PairReport(region, account, total=1, counts=counts, calls=1, fatal=fatal)

    expired = Reason("ExpiredToken", "The security token included in the request is expired")
    pairs = [row("us-east-1", "111111111111"), row("eu-west-1", "222222222222", expired)]
    out = console()
    render_summary(Report(run="r", action="stop", pairs=pairs), out)
    text = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert "stopped in 222222222222/eu-west-1: ExpiredToken: The security token" in text
    out = console()
    render_summary(Report(run="r", action="stop", pairs=pairs[1:]), out)
    text = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert "stopped: ExpiredToken: The security token" in text  # one pair: no need to say
    # A pair stopped for another reason is not named beside the reason given.
    denied = Reason("UnauthorizedOperation", "not allowed")
    third = row("us-west-2", "333333333333", denied)
    report = Report(run="r", action="stop", pairs=[*pairs, third])
    assert report.stopped_in() == ["222222222222/eu-west-1"]
    # A stop of every pair (a signal, the ledger), or by the failure budget, names none.
    every = [
        replace(p, fatal=None, stopped=Reason("Interrupted", "stopped by SIGTERM")) for p in pairs
    ]
    assert Report(run="r", action="stop", pairs=every).stopped_in() == []
    early = [
        pairs[0],
        replace(pairs[1], fatal=None, stopped=Reason("EndpointUnreachable", "no answer")),
    ]
    assert Report(run="r", action="stop", pairs=early).stopped_in() == ["222222222222/eu-west-1"]
    budget = Reason("BudgetSpent", "more than 0 failed")
    assert Report(run="r", action="stop", pairs=early, budget_spent=budget).stopped_in() == []


def run_at(
    rates: list[tuple[float, float]], total: int = 2000, throttled_at: float | None = None
) -> Stats:
    """A pair's stats fed as if ``rate`` intents per second were done for ``seconds``,
    one stretch after another (an answer per intent); one call throttled at
    ``throttled_at`` if given."""
    stats = Stats()
    stats(Event("queued", 0.0, ids=tuple(f"i-{n}" for n in range(total)), cwnd=4))
    at, n = 0.0, 0
    throttle = Outcome(Kind.THROTTLED, "RequestLimitExceeded", None)
    for seconds, rate in rates:
        for _ in range(int(seconds * rate)):
            if throttled_at is not None and at + 1 / rate >= throttled_at:
                stats(Event("answered", throttled_at, cwnd=4, outcome=throttle))
                stats(Event("throttled", throttled_at, ids=("i-x",), cwnd=4, outcome=throttle))
                throttled_at = None
            at += 1 / rate
            stats(Event("answered", at, cwnd=4, in_flight=2))
            stats(Event("succeeded", at, ids=(f"i-{n}",), cwnd=4))
            n += 1
    return stats


def test_a_rate_that_fell_far_below_its_best_for_a_while_is_a_fall() -> None:
    snap = run_at([(10.0, 40.0), (12.0, 2.0)]).snapshot()
    watch = RateWatch().update(snap.series, snap.total)
    fall = watch.fell()
    assert fall is not None and watch.falling is fall
    assert fall.best == pytest.approx(40.0, rel=0.05)
    assert fall.low == pytest.approx(2.0, rel=0.15)
    assert fall.lasted >= 5.0


def test_a_burst_spent_then_the_refill_kept_up_is_no_fall() -> None:
    """EC2's limits: a burst of 1,000 spent at 200/s, then the refill's 20/s. The rate
    falls to a tenth of the burst's, as it should: no fall, and no word of throttles."""
    burst = run_at([(5.0, 200.0), (60.0, 20.0)], total=2400, throttled_at=5.0).snapshot()
    assert RateWatch().update(burst.series, burst.total).fell() is None
    # A throttle early on, then 40/s that sank to 2/s: a fall from what came after it.
    sank = run_at([(10.0, 40.0), (12.0, 2.0)], throttled_at=0.5).snapshot()
    fall = RateWatch().update(sank.series, sank.total).fell()
    assert fall is not None and fall.best == pytest.approx(40.0, rel=0.05)
    # 20/s kept up for a minute, then throttles and 2/s: the minute was no burst.
    late = run_at([(60.0, 20.0), (20.0, 2.0)], throttled_at=61.0).snapshot()
    fall = RateWatch().update(late.series, late.total).fell()
    assert fall is not None and fall.best == pytest.approx(20.0, rel=0.05)
    # Sunk from 100/s to 1/s before its first throttle: the fall under way is kept.
    stalled = run_at([(30.0, 100.0), (30.0, 1.0)], total=5000, throttled_at=40.0).snapshot()
    fall = RateWatch().update(stalled.series, stalled.total).fell()
    assert fall is not None and fall.best == pytest.approx(100.0, rel=0.05)


def test_a_short_dip_or_the_end_of_the_list_is_no_fall() -> None:
    dip = run_at([(10.0, 40.0), (3.0, 2.0), (10.0, 40.0)]).snapshot()
    assert RateWatch().update(dip.series, dip.total).fell() is None
    # 400 done at 40/s, then the last few trickle in: nothing much was left to do.
    tail = run_at([(10.0, 40.0), (10.0, 0.5)], total=410).snapshot()
    assert RateWatch().update(tail.series, tail.total).fell() is None


def test_the_live_view_and_the_summary_say_when_the_rate_fell() -> None:
    stats = run_at([(10.0, 40.0), (12.0, 2.0)])
    out = console(terminal=True)
    screen = "\n".join(screen_of(LiveView(out, [("us-east-1", stats)], "terminate"), 22.0, out))
    assert re.search(
        r"rate fell to 2\.\d/s from (39|40|41)\.\d/s: throttles that do not answer to slowing",
        screen,
    )
    steady = run_at([(22.0, 40.0)])
    out = console(terminal=True)
    screen = "\n".join(screen_of(LiveView(out, [("us-east-1", steady)], "terminate"), 22.0, out))
    assert "rate fell" not in screen

    row = stats.report(PairReport("us-east-1", total=2000))
    report = Report(run="r", action="terminate", pairs=[row], elapsed_seconds=22.0)
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert re.search(r"  rate fell to [12]\.\d/s from 40\.\d/s: throttles that do not", text)
    assert re.search(r"slowing down \(for \d+s\)", text)


def test_the_live_view_gives_a_fall_the_cause_the_summary_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After an outage the view said the rate fell to "throttles that do not answer to
    slowing down", where the summary said the endpoint did not answer; and with the
    rate back over the fall's line it said "rate fell to 1.0/s from 1.0/s"."""
    import swarm_cli.display as display

    stats = run_at([(10.0, 40.0), (12.0, 2.0)])
    stats.outages, stats.timeouts = 1, 6
    out = console(terminal=True)
    screen = " ".join(screen_of(LiveView(out, [("us-east-1", stats)], "stop"), 22.0, out))
    assert re.search(r"rate fell to 2\.\d/s from (39|40|41)\.\d/s: the endpoint did not", screen)
    assert "slowing down" not in screen
    # The fall under way, the rate read now back over a quarter of its best: not said.
    monkeypatch.setattr(display, "recent_rate", lambda s, t: 12.0)
    out = console(terminal=True)
    screen = " ".join(screen_of(LiveView(out, [("us-east-1", stats)], "stop"), 22.0, out))
    assert "rate fell" not in screen


def test_a_fall_over_a_stand_still_is_said_to_be_the_process_s_own() -> None:
    """Ctrl-Z for 40 s mid-run: the summary and the live view said the rate fell to
    "throttles that do not answer to slowing down", on a run that had not one throttle."""
    stats = run_at([(10.0, 40.0), (12.0, 2.0)])
    stats(Event("stood_still", 12.0, latency=40.0))
    assert stats.stood_still == 40.0
    row = stats.report(PairReport("us-east-1", total=2000))
    assert row.stood_still_seconds == 40.0
    out = console()
    render_summary(Report(run="r", action="stop", pairs=[row]), out)
    text = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert re.search(r"rate fell to [12]\.\d/s from 40\.\d/s: this process stood still for", text)
    assert "40s (stopped with Ctrl-Z" in text and "slowing down" not in text, text
    out = console(terminal=True)
    screen = " ".join(screen_of(LiveView(out, [("us-east-1", stats)], "stop"), 22.0, out))
    assert "this process stood still for 40s" in screen and "slowing down" not in screen
    # Both: the stand-still and the stretches with no answer are said.
    both = replace(row, outages=1)
    out = console()
    render_summary(Report(run="r", action="stop", pairs=[both]), out)
    text = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert "CPU); the endpoint did not answer for a while (1 outage)" in text, text
    # A stand-still shorter than a fall lasts makes none alone: the throttles are named.
    brief = replace(row, stood_still_seconds=2.0)
    out = console()
    render_summary(Report(run="r", action="stop", pairs=[brief]), out)
    text = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert "stood still" not in text and "slowing down" in text, text


def test_a_fall_over_an_endpoint_that_did_not_answer_is_said_to_be_that() -> None:
    # The endpoint hung for 30 s: the summary said "rate fell ...: throttles that do not
    # answer to slowing down", and nothing of the outage.
    row = run_at([(10.0, 40.0), (12.0, 2.0)]).report(PairReport("us-east-1", total=2000))
    report = Report(run="r", action="stop", pairs=[replace(row, outages=1, timeouts=3)])
    out = console()
    render_summary(report, out)
    text = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert re.search(r"rate fell to [12]\.\d/s from 40\.\d/s: the endpoint did not answer", text)
    assert "(1 outage, 3 calls timed out)" in text and "slowing down" not in text
    # Calls timed out, their IDs tried again: nothing given up.
    assert "calls that timed out with no answer: 3 (their IDs tried again)" in text
    # No fall, yet an outage: said all the same.
    steady = run_at([(22.0, 40.0)]).report(PairReport("us-east-1", total=2000))
    out = console()
    render_summary(Report(run="r", action="stop", pairs=[replace(steady, outages=2)]), out)
    assert "the endpoint did not answer for a while (2 outages)" in out.file.getvalue()  # type: ignore[attr-defined]


def test_a_run_whose_every_answer_is_a_throttle_says_so_live_in_logs_and_at_the_end() -> None:
    stats = run_at([(2.0, 10.0)], total=40)
    throttle = Outcome(Kind.THROTTLED, "RequestLimitExceeded", None)
    for k in range(12):  # 4 s apart from 2 s on: 44 s of nothing but throttles
        at = 2.0 + 4 * k
        stats(Event("answered", at, cwnd=1, outcome=throttle))
        stats(Event("throttled", at, ids=("i-30",), cwnd=1, outcome=throttle))
    assert stats.throttled_since == 2.0
    line = status_line(stats, now=20.0)
    assert "every call throttled" not in line  # under half a minute: nothing to say yet
    line = status_line(stats, now=46.0)
    assert "every call throttled for 44s: the account's limit is taken by other" in line
    assert "nothing is lost, swarm goes on probing" in line
    assert "in 1 pair(s), e.g.: every call throttled for 44s" in total_line(
        [stats.snapshot(), Stats().snapshot()], 46.0
    )
    out = console(terminal=True)
    screen = " ".join(screen_of(LiveView(out, [("us-east-1", stats)], "terminate"), 46.0, out))
    assert "every call throttled for 44s" in " ".join(screen.split())

    row = stats.report(PairReport("us-east-1", total=40))
    assert row.throttled_for == 44.0  # to the last event
    out = console()
    render_summary(Report(run="r", action="terminate", pairs=[row], elapsed_seconds=46.0), out)
    assert "every call throttled for the last 44s" in out.file.getvalue()  # type: ignore[attr-defined]
    # A fixed batch of several IDs may need more instance tokens than the bucket holds.
    said = {}
    for auto in (False, True):
        out = console()
        report = Report(run="r", action="terminate", pairs=[row], batch_size=5, auto_batch=auto)
        render_summary(report, out)
        said[auto] = " ".join(out.file.getvalue().split())  # type: ignore[attr-defined]
    assert "calls of 5 IDs need more instance tokens at once than the bucket holds" in said[False]
    assert "calls of 5 IDs" not in said[True]  # auto halves itself

    # One call let through ends it.
    stats(Event("answered", 47.0, cwnd=1, in_flight=0))
    assert stats.throttled_since is None
    assert stats.report(PairReport("us-east-1", total=40)).throttled_for is None


def test_calls_that_time_out_or_meet_no_endpoint_after_a_throttle_are_no_storm() -> None:
    """One throttle, then calls that got no answer (an endpoint or a credential refresh
    that hangs), or met no endpoint: not "every call throttled" (the outage says it)."""
    throttle = Outcome(Kind.THROTTLED, "RequestLimitExceeded", None)
    refused = Outcome(Kind.UNREACHABLE, "EndpointConnectionError", None)
    for after in ("timed_out", "refused"):
        stats = run_at([(2.0, 10.0)], total=40)
        stats(Event("answered", 3.0, cwnd=1, outcome=throttle))
        stats(Event("throttled", 3.0, ids=("i-30",), cwnd=1, outcome=throttle))
        for k in range(12):
            at = 4.0 + 4 * k
            if after == "timed_out":
                stats(Event("timed_out", at, ids=("i-31",), cwnd=1))
            else:
                stats(Event("answered", at, cwnd=1, outcome=refused))
        assert stats.throttled_since is None, after
        assert "every call throttled" not in status_line(stats, now=60.0)
        assert stats.report(PairReport("us-east-1", total=40)).throttled_for is None


def test_a_look_up_without_a_view_says_an_outage_and_a_long_throttle_storm_once() -> None:
    """A look-up (--resume's, a rollback's) shows no progress: what keeps it waiting is
    said on a line of its own, once per outage or storm, not for each call."""
    from swarm_cli.events import Answered, OutageBegan, Recovered
    from swarm_cli.outcome import Kind, Outcome
    from swarm_cli.report import Pair
    from swarm_cli.views import OutageNote

    out = console()
    note = OutageNote(out, "DescribeSnapshots", Pair(None, "us-east-1"), several=False)
    throttle = Outcome(Kind.THROTTLED, "HttpError", "HTTP 503", http_status=503)
    for at in (0.0, 10.0, 29.0, 31.0, 40.0, 70.0):
        Answered(at, ("snap-1",), throttle).deliver(note)
    Answered(71.0, ("snap-1",), Outcome(Kind.SUCCEEDED)).deliver(note)
    Answered(72.0, ("snap-1",), throttle).deliver(note)
    error = Outcome(Kind.TRANSIENT, "HttpError", "HTTP 502", http_status=502, maybe_acted=True)
    OutageBegan(80.0, outcome=error).deliver(note)
    Recovered(90.0).deliver(note)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines == [
        "DescribeSnapshots: every call throttled for 31s: the account's limit is taken by "
        "other callers, or the API refuses calls for now; nothing is lost, swarm goes on probing",
        "DescribeSnapshots: OUTAGE: only errors from the endpoint (HTTP 502), probing",
        "DescribeSnapshots: the endpoint answers again",
    ]


def test_an_outage_named_by_the_endpoint_is_shown_as_text() -> None:
    """The error code in an outage's words comes from the endpoint's answer: an escape in
    it is shown, never acted on by the terminal."""
    from swarm_cli.events import OutageBegan
    from swarm_cli.outcome import Kind, Outcome
    from swarm_cli.stats import Stats

    stats = Stats()
    hostile = Outcome(Kind.TRANSIENT, "Err\x1b[2J", "x", http_status=500, maybe_acted=True)
    stats(OutageBegan(1.0, outcome=hostile))
    line = status_line(stats.snapshot(), now=2.0)
    assert "\x1b" not in line and "OUTAGE: only errors from the endpoint (Err\\x1b[2J)" in line


def test_a_row_per_missing_id_shows_its_own_id_of_ec2s_list() -> None:
    """EC2's NotFound names every ID of its call: ten rows repeated the whole list (cut off
    at 300 characters), burying the line that says what to do."""
    from swarm_cli.html_report import render_html
    from swarm_cli.summary_md import markdown_summary

    ids = [f"i-0000000{n}" for n in range(5)]
    said = f"The instance IDs '{', '.join(ids)}' do not exist"
    report = Report(
        run="r",
        action="terminate",
        pairs=[
            PairReport(
                "us-east-1",
                total=5,
                counts={"succeeded": 0, "failed": 0, "missing": 5, "pending": 0},
                calls=1,
                window=WindowReport(final=1, peak=1, decreases=0),
            )
        ],
        problems=[Problem(i, "missing", "InvalidInstanceID.NotFound", said) for i in ids],
        ledger="l.jsonl",
        elapsed_seconds=1.0,
    )
    out = console()
    render_summary(report, out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    for i in ids:
        assert (
            f"{i}  missing  InvalidInstanceID.NotFound  The instance IDs '{i}' (and 4 more" in text
        )
    assert text.count(ids[1]) == 2  # its own row only: the ID, then its part of the message
    assert "'i-00000002' (and 4 more of its call)" in markdown_summary(report)
    page = render_html(report)
    assert "i-00000003&#x27; (and 4 more of its call)" in page, page[-3000:]
    # The ledger and --output json keep EC2's words whole.
    assert report.problems[0].message == said


def test_a_rate_that_fell_under_one_a_second_reads_as_what_it_is() -> None:
    """StartInstances refills 2 instances a second at EC2, a tenth of a terminate's: a
    run scaled down from it goes at 0.5/s, which "0.0/s" read as if nothing went."""
    fall = Fall(best=1.04, low=0.5, since=10.0, until=100.0)
    assert fall_text(fall).startswith("rate fell to 0.5/s from 1.0/s: ")
    assert fall_text(fall, now_rate=0.049).startswith("rate fell to 0.049/s from 1.0/s")
    assert fall_text(Fall(40.3, 2.06, 1.0, 9.0)).startswith("rate fell to 2.1/s from 40.3/s")


def test_ctrl_z_gives_the_cursor_back_and_fg_draws_below_what_the_shell_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The view hid the cursor and did nothing on SIGTSTP: the shell's prompt had no
    cursor, and at fg the view moved up over what the shell had printed, leaving part of
    an old frame on the screen."""
    import signal

    import swarm_cli.display as display

    stops: list[int] = []
    monkeypatch.setattr(display.os, "kill", lambda pid, sig: stops.append(sig))
    out = Console(file=io.StringIO(), width=100, height=40, force_terminal=True)
    view = LiveView(out, [("us-east-1", recorded_run())], "terminate", refresh_per_second=1)
    before = signal.getsignal(signal.SIGTSTP)
    with view:
        assert signal.getsignal(signal.SIGTSTP) == view._suspend
        view._live.refresh()
        start = out.file.tell()  # type: ignore[attr-defined]
        view._suspend(signal.SIGTSTP, None)  # as Ctrl-Z: the process stops in os.kill
        assert stops == [signal.SIGTSTP]
        assert signal.getsignal(signal.SIGTSTP) == view._suspend  # again, for the next
        stopped = out.file.getvalue()[start:]  # type: ignore[attr-defined]
        # The last frame, the cursor shown (while stopped), hidden again at fg.
        assert stopped.endswith("\x1b[?25h\x1b[?25l")
        out.file.write("[1]+  Stopped    swarm terminate\n$ fg\n")  # type: ignore[attr-defined]
        mark = out.file.tell()  # type: ignore[attr-defined]
        view._live.refresh()
        redrawn = out.file.getvalue()[mark:]  # type: ignore[attr-defined]
    # A fresh view: it does not move up into the shell's lines first.
    assert "\x1b[1A" not in redrawn.split("terminate", 1)[0], repr(redrawn[:80])
    assert "us-east-1" in redrawn
    assert signal.getsignal(signal.SIGTSTP) == before


def test_a_call_left_unanswered_a_while_is_said_before_it_makes_an_outage() -> None:
    """An endpoint that hangs: one call on its way, no answer. The logs say so while it
    lasts, not only once enough calls went unanswered to make an outage."""
    stats = Stats()
    stats(Event("queued", 0.0, ids=("i-1", "i-2")))
    stats(Event("sent", 1.0, ids=("i-1",), in_flight=1))
    stats(Event("sent", 2.0, ids=("i-2",), in_flight=2))
    assert "no answer" not in status_line(stats, now=4.0)  # a slow call: nothing yet
    line = status_line(stats, now=13.0)
    assert "no answer for 12s" in line, line
    assert "in 1 pair(s), e.g.: no answer for 12s" in total_line(
        [stats.snapshot(), Stats().snapshot()], 13.0
    )
    out = console(terminal=True)
    screen = " ".join(screen_of(LiveView(out, [("us-east-1", stats)], "stop"), 13.0, out))
    assert "no answer for 12s" in " ".join(screen.split())
    # The oldest answered: the next one's wait is what counts.
    stats(Event("answered", 13.0, ids=("i-1",), in_flight=1, latency=12.0))
    assert "no answer for 5s" in status_line(stats, now=7.0)
    stats(Event("answered", 14.0, ids=("i-2",), in_flight=0, latency=12.0))
    assert "no answer" not in status_line(stats, now=30.0)
    # A call given up on with no answer (timed out), sent again: the silence counts from
    # when the first left, until an answer comes.
    unanswered = Outcome(Kind.UNREACHABLE, "CallTimeout", None)
    stats(Event("sent", 20.0, ids=("i-2",), in_flight=1))
    stats(Event("answered", 25.0, ids=("i-2",), in_flight=0, outcome=unanswered))
    assert "no answer" not in status_line(stats, now=26.0)  # nothing on its way
    stats(Event("sent", 26.0, ids=("i-2",), in_flight=1))
    assert "no answer for 10s" in status_line(stats, now=30.0)
    stats(Event("answered", 30.5, ids=("i-2",), in_flight=0, outcome=unanswered))
    stats(Event("sent", 31.0, ids=("i-2",), in_flight=1))
    stats(Event("answered", 32.0, ids=("i-2",), in_flight=0))
    stats(Event("sent", 33.0, ids=("i-2",), in_flight=1))
    assert "no answer" not in status_line(stats, now=36.0)
    # An outage says more, and says it instead.
    stats(Event("outage", 40.0, ids=("i-2",), in_flight=1))
    line = status_line(stats, now=50.0)
    assert "OUTAGE" in line and "no answer for" not in line


def test_no_answer_is_not_said_of_a_pair_that_stopped_or_of_this_process_standing_still() -> None:
    """A stop resolves the calls in flight pending, unanswered: nothing is awaited after.
    A pause of this process is given back to the calls, as the engine gives it."""
    stopped = Stats()
    stopped(Event("queued", 0.0, ids=("i-1", "i-2")))
    stopped(Event("sent", 1.0, ids=("i-1",), in_flight=1))
    stopped(Event("pending", 2.0, ids=("i-2",), in_flight=1))  # an ID no call carried
    assert "no answer for 9s" in status_line(stopped, now=10.0)
    stopped(Event("pending", 3.0, ids=("i-1",), in_flight=0))
    assert "no answer" not in status_line(stopped, now=60.0)
    paused = Stats()
    paused(Event("queued", 0.0, ids=("i-1",)))
    paused(Event("sent", 1.0, ids=("i-1",), in_flight=1))
    paused(Event("stood_still", 301.0, in_flight=1, latency=299.0))
    assert "no answer" not in status_line(paused, now=302.0)
    assert "no answer for 7s" in status_line(paused, now=307.0)


def test_pairs_waiting_are_said_beside_a_pair_in_an_outage_the_longest_wait_first() -> None:
    def waiting(since: float) -> Stats:
        stats = Stats()
        stats(Event("queued", 0.0, ids=("i-1",)))
        stats(Event("sent", since, ids=("i-1",), in_flight=1))
        return stats

    down = waiting(0.0)
    down(Event("outage", 3.0, ids=("i-1",), in_flight=1))
    snaps = [down.snapshot(), waiting(8.0).snapshot(), waiting(2.0).snapshot()]
    line = total_line(snaps, 20.0)
    assert "OUTAGE in 1 pair(s)" in line
    assert "in 2 pair(s), e.g.: no answer for 18s" in line, line
