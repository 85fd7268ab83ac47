from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from swarm_cli.report import PairReport, Problem, Report, Sample, WindowReport
from swarm_cli.sandbox import Sandbox
from swarm_cli.summary_md import append_step_summary, cell, markdown_summary, mermaid_chart


def sample(t: float, cwnd: float) -> Sample:
    return Sample(t, cwnd, 0, 0, 0)


def recorded_report() -> Report:
    east = PairReport(
        "us-east-1",
        "111111111111",
        total=6,
        counts={"succeeded": 4, "failed": 1, "missing": 0, "pending": 1},
        calls=9,
        throttled_calls=2,
        window=WindowReport(final=3, peak=8),
        series=[sample(t, c) for t, c in ((0, 1), (10, 4), (20, 8), (30, 4), (40, 6), (59, 3))],
    )
    west = PairReport(
        "eu-west-1",
        "222222222222",
        total=4,
        counts={"succeeded": 3, "failed": 0, "missing": 1, "pending": 0},
        calls=5,
        throttled_calls=0,
        window=WindowReport(final=5, peak=5.5),
        series=[sample(0, 2), sample(30, 5)],
    )
    return Report(
        run="r",
        action="stop",
        pairs=[east, west],
        problems=[
            Problem("i-0001", "failed", "IncorrectInstanceState", "in state | stopping",
                    "us-east-1", "111111111111"),
            Problem("i-0003", "missing", "InvalidInstanceID.NotFound", None,
                    "eu-west-1", "222222222222"),
            Problem("i-0002", "pending", "Interrupted", "stopped by SIGINT",
                    "us-east-1", "111111111111"),
        ],
        ledger="runs/ledger.jsonl",
        signal="SIGINT",
        elapsed_seconds=61.5,
    )  # fmt: skip


def test_title_and_counts_table() -> None:
    text = markdown_summary(recorded_report())
    lines = text.splitlines()
    assert lines[0] == "## swarm stop: 7 of 10 succeeded, 1 failed, 1 pending, 1 missing in 61.5s"
    for row in (
        "| succeeded | 7 |",
        "| failed | 1 |",
        "| missing | 1 |",
        "| pending | 1 |",
        "| total | 10 |",
        "| calls | 14 |",
        "| throttled calls | 2 |",
    ):
        assert row in lines
    assert "**Interrupted** by SIGINT: what was not done is recorded as pending." in lines
    assert "Ledger: `runs/ledger.jsonl`" in lines


def test_a_row_per_pair() -> None:
    lines = markdown_summary(recorded_report()).splitlines()
    assert "| 111111111111 | us-east-1 | 4 | 1 | 0 | 1 | 9 | 2 | 8 |" in lines
    assert "| 222222222222 | eu-west-1 | 3 | 0 | 1 | 0 | 5 | 0 | 5.5 |" in lines


def test_problems_listed_failed_first_with_pipes_escaped() -> None:
    lines = markdown_summary(recorded_report()).splitlines()
    start = lines.index("### Not done (3)")
    assert lines[start + 4 : start + 7] == [
        "| i-0001 | failed | IncorrectInstanceState | 111111111111 | us-east-1 "
        "| in state \\| stopping |",
        "| i-0002 | pending | Interrupted | 111111111111 | us-east-1 | stopped by SIGINT |",
        "| i-0003 | missing | InvalidInstanceID.NotFound | 222222222222 | eu-west-1 |  |",
    ]


def test_problems_beyond_the_limit_are_counted() -> None:
    text = markdown_summary(recorded_report(), max_failed=1)
    assert "| i-0001 | failed |" in text and "i-0002" not in text
    assert "… and 2 more (see the ledger)." in text
    # A ledger that failed holds not all of them: the run's log printed those it could not.
    failed = replace(recorded_report(), ledger_error="No space left on device")
    text = markdown_summary(failed, max_failed=1)
    assert "… and 2 more (the ledger could not hold them all: see the run's log)." in text


def test_cell_escapes_what_would_break_a_table() -> None:
    # The newline is shown as its escape, whose backslash Markdown must keep.
    assert cell("a|b\nc") == "a\\|b\\\\x0ac"
    assert cell("<b>") == "&lt;b&gt;"
    assert cell(None) == ""


def test_mermaid_chart_resamples_each_pair_to_60_points() -> None:
    text = markdown_summary(recorded_report())
    block = text[text.index("```mermaid") :]
    block = block[: block.index("```", 3) + 3].splitlines()
    assert block[2] == "xychart-beta"
    assert '    x-axis "seconds" 0 --> 59' in block
    assert '    y-axis "cwnd (calls in flight allowed)" 0 --> 8' in block
    # 60 points over 59 s: one a second; each is the largest window since the second
    # before (a decrease shows a second late; a peak between two points is never lost).
    east = [1] * 10 + [4] * 10 + [8] * 11 + [4] * 9 + [6] * 20
    west = [2] * 30 + [5] * 30
    lines = [line for line in block if line.startswith("    line ")]
    assert lines == [
        f"    line [{', '.join(map(str, east))}]",
        f"    line [{', '.join(map(str, west))}]",
    ]
    assert "Lines: blue: 111111111111/us-east-1, orange: 222222222222/eu-west-1" in text


def test_the_chart_keeps_a_short_peak_and_starts_at_the_canarys_window() -> None:
    row = PairReport("us-east-1", None, total=1)
    # A startup to 25 within the first second of a 100 s run, then 6 for the rest.
    row.series = [sample(0.4, 10), sample(0.7, 25), sample(0.9, 6), sample(100, 6)]
    chart = mermaid_chart([row])
    assert chart is not None
    (line,) = [x for x in chart.splitlines() if x.startswith("    line ")]
    values = [float(v) for v in line.removeprefix("    line [").rstrip("]").split(", ")]
    assert values[0] == 1 and values[1] == 25 and set(values[2:]) == {6}
    assert '    y-axis "cwnd (calls in flight allowed)" 0 --> 25' in chart


def test_no_chart_without_points() -> None:
    report = recorded_report()
    for row in report.pairs:
        row.series = []
    assert mermaid_chart(report.pairs) is None
    assert "```mermaid" not in markdown_summary(report)


def test_step_summary_appends(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("# earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    assert append_step_summary(recorded_report(), env) == str(target)
    assert append_step_summary(recorded_report(), env) == str(target)
    text = target.read_text()
    assert text.startswith("# earlier step\n")
    assert text.count("## swarm stop: 7 of 10 succeeded") == 2
    # One it makes is a text file, not an executable one (whatever the umask leaves).
    made = tmp_path / "new.md"
    assert append_step_summary(recorded_report(), {"GITHUB_STEP_SUMMARY": str(made)})
    assert made.stat().st_mode & 0o111 == 0


def test_a_step_summary_fifo_that_nobody_reads_is_skipped_not_waited_on(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "summary.md"
    os.mkfifo(fifo)
    assert append_step_summary(recorded_report(), {"GITHUB_STEP_SUMMARY": str(fifo)}) is None
    # With a reader, it is written.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert append_step_summary(recorded_report(), {"GITHUB_STEP_SUMMARY": str(fifo)})
        assert b"## swarm stop" in os.read(reader, 1 << 16)
    finally:
        os.close(reader)


def test_step_summary_is_skipped_without_the_variable_or_a_writable_file(
    tmp_path: Path,
) -> None:
    assert append_step_summary(recorded_report(), {}) is None
    assert append_step_summary(recorded_report(), {"GITHUB_STEP_SUMMARY": str(tmp_path)}) is None


def test_a_summary_stays_under_githubs_limit_whatever_the_messages(tmp_path: Path) -> None:
    """EC2's NotFound names every ID of a call: 1000 of them in each of 50 rows would make
    a summary GitHub refuses (over 1 MiB), and then shows nothing at all."""
    from dataclasses import replace

    from swarm_cli.summary_md import MESSAGE_CHARS, SUMMARY_BYTES

    named = "The instance IDs '" + ", ".join(f"i-{n:017x}" for n in range(1000)) + "' do not exist"
    report = recorded_report()
    report = replace(
        report,
        problems=[
            Problem(f"i-{n:08x}", "missing", "InvalidInstanceID.NotFound", named, "us-east-1")
            for n in range(3000)
        ],
    )
    text = markdown_summary(report)
    assert len(text.encode()) < 64 * 1024
    rows = [line for line in text.splitlines() if "InvalidInstanceID.NotFound" in line]
    assert len(rows) == 50 and all(len(row) < MESSAGE_CHARS + 120 for row in rows)
    assert all(row.endswith("… |") for row in rows)
    # A summary file nearly full already (a plan's table): only the head is added.
    target = tmp_path / "summary.md"
    target.write_text("x" * (SUMMARY_BYTES - 2000))
    assert append_step_summary(report, {"GITHUB_STEP_SUMMARY": str(target)}) == str(target)
    assert target.stat().st_size <= SUMMARY_BYTES
    assert "the rest is left out" in target.read_text()[-400:]


def test_a_throttle_storm_is_said_in_the_summary() -> None:
    report = recorded_report()
    report.pairs[0].throttled_for = 125.0
    text = markdown_summary(report)
    assert "**Every call throttled** in 111111111111/us-east-1 for the last 2m05s" in text


def test_the_wait_and_the_rollback_after_the_run_are_said_in_words() -> None:
    """A run its budget rolled back: the page says so, or a reader takes the run's
    counts for the state left behind."""
    report = recorded_report()
    report.extra["wait"] = {"target": "stopped", "reached": 3, "timed_out": 1}
    report.extra["rollback"] = {
        "action": "start",
        "total": 140,
        "counts": {"succeeded": 138, "failed": 2, "missing": 0, "pending": 0},
        "wait": {"target": "running", "reached": 138},
    }
    text = markdown_summary(report)
    assert "**Waited:** wait for stopped: 3 reached, 1 timed out ⚠️" in text
    assert "**Rolled back:** rollback (start): 138 of 140 undone, 2 failed ⚠️" in text
    assert "**Waited:** rollback's wait for running: 138 reached\n" in text
    del report.extra["rollback"]
    report.extra["rollback_stopped"] = {"signal": "SIGTERM", "undo": "swarm rollback l|x --run r"}
    text = markdown_summary(report)
    assert (
        "**Not rolled back:** rollback stopped by SIGTERM before anything was undone: "
        "swarm rollback l\\|x --run r ⚠️"
    ) in text


def test_a_rollback_is_headed_by_the_runs_it_undoes() -> None:
    one = replace(recorded_report(), action="start", extra={"undoes": "r1"})
    assert markdown_summary(one).startswith("## swarm rollback of run r1 (start): 7 of 10")
    two = replace(one, extra={"undoes": "r1, r2"})
    assert markdown_summary(two).startswith("## swarm rollback of runs r1, r2 (start): ")


def test_a_run_that_sent_nothing_draws_no_window(tmp_path: Path) -> None:
    report = recorded_report()
    assert "```mermaid" in markdown_summary(report)
    for pair in report.pairs:
        pair.calls = 0  # a resume that found everything done
    assert "```mermaid" not in markdown_summary(report)


def test_a_step_summary_that_cannot_be_written_says_why(tmp_path: Path) -> None:
    why: list[str] = []
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "such" / "summary.md")}
    assert append_step_summary(recorded_report(), env, why=why) is None
    assert why == ["No such file or directory"]


def test_a_run_refused_or_misused_in_a_job_says_why_on_its_page(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_cli import swarm, write_ids

    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    ids = write_ids(tmp_path / "ids.txt", sandbox.launch(3))
    common = ("--endpoint-url", sandbox.endpoint, "--ledger", str(tmp_path / "l.jsonl"))
    code, _out, _err = swarm("terminate", "--ids", ids, *common, "--yes", "--max-count", "2")
    assert code == 3
    page = summary.read_text()
    assert page.startswith("## swarm terminate: exit 3 (")
    assert "refusing to terminate 3 instances: --max-count is 2" in page, page

    code, _out, _err = swarm("ec2", "delete-snapshot", "--ids", str(tmp_path / "nope.txt"))
    assert code == 2
    assert "## swarm ec2 delete-snapshot: exit 2" in summary.read_text()
    assert "nope.txt" in summary.read_text()

    # A name with backticks shows as typed, in a longer fence.
    code, _out, _err = swarm("terminate", "--ids", str(tmp_path / "a```b.txt"))
    assert code == 2 and "````text" in summary.read_text() and "a```b.txt" in summary.read_text()
    # A summary that cannot be written: warned of; the exit code stands.
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "summary.md"))
    code, _out, err = swarm("terminate", "--ids", str(tmp_path / "nope.txt"))
    said = " ".join(err.split())
    assert code == 2 and "could not append the summary to" in said
    assert "No such file or directory" in said
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    # A run that wrote its own summary, and a plan, add nothing of this kind.
    summary.unlink()
    code, _out, _err = swarm("terminate", "--ids", ids, *common, "--yes")
    assert code == 0 and summary.read_text().startswith("## swarm terminate: 3 of 3")
    code, _out, _err = swarm("terminate", "--ids", ids, *common, "--dry-run")
    assert summary.read_text().count("## swarm") == 1
    # A dry run refused by a rail is no prediction: its end is said as a run's is.
    code, _out, _err = swarm("terminate", "--ids", ids, *common, "--dry-run", "--max-count", "2")
    assert code == 3
    assert "## swarm terminate: exit 3 (" in summary.read_text()
    assert summary.read_text().count("## swarm") == 2


def test_a_rollbacks_heading_shows_the_ledgers_run_id_as_text() -> None:
    """The run ID a rollback undoes is the ledger's, which anyone may have edited."""
    hostile = "r1\n\n# PWNED\n<details open><summary>\x1b[31mX</summary>\u202eabc"
    text = markdown_summary(replace(recorded_report(), action="start", extra={"undoes": hostile}))
    title = text.splitlines()[0]
    assert title.startswith("## swarm rollback of run r1") and title.endswith("in 61.5s")
    assert "<details" not in text and "\x1b" not in text and "\u202e" not in text
    assert "\n# PWNED" not in text


def test_an_endpoints_megabyte_error_is_cut_and_a_full_page_gets_nothing(tmp_path: Path) -> None:
    from swarm_cli.report import Reason
    from swarm_cli.summary_md import CODE_CHARS, NOTE_CHARS, SUMMARY_BYTES

    report = recorded_report()
    report.pairs[0].fatal = Reason("Code" + "X" * 600, "m" * 1_200_000)  # the run's too
    report.problems[0] = replace(report.problems[0], code="C" * 600)
    text = markdown_summary(report)
    assert len(text.encode()) < 64 * 1024
    (note,) = [line for line in text.splitlines() if line.startswith("**Stopped")]
    # Of several pairs, the one it came from is named.
    assert len(report.pairs) > 1 and note.startswith(
        f"**Stopped in {report.pairs[0].pair.label}:**"
    )
    assert "X" * (CODE_CHARS - 5) in note and "X" * CODE_CHARS not in note
    assert "m" * (NOTE_CHARS - 1) in note and "m" * NOTE_CHARS not in note
    assert "C" * (CODE_CHARS - 1) + "…" in text and "C" * CODE_CHARS not in text
    # A page within a few hundred bytes of GitHub's limit: nothing is added, and why is said.
    target = tmp_path / "summary.md"
    target.write_text("x" * (SUMMARY_BYTES - 200) + "\n")
    why: list[str] = []
    assert append_step_summary(report, {"GITHUB_STEP_SUMMARY": str(target)}, why=why) is None
    assert target.stat().st_size == SUMMARY_BYTES - 199
    assert why and "1 MiB" in why[0]


def test_a_summary_after_a_page_with_no_last_line_end_starts_a_line(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("someone's text")
    assert append_step_summary(recorded_report(), {"GITHUB_STEP_SUMMARY": str(target)})
    assert target.read_text().startswith("someone's text\n## swarm stop: ")


def test_a_rails_refusal_is_said_in_words_in_the_step_summary_and_the_report() -> None:
    """A run whose rail could not see refused some (exit 3): the terminal said so, the
    step summary showed plain failures, and the HTML report the raw key and number."""
    from swarm_cli.html_report import render_html

    report = recorded_report()
    report.extra["rail_unverified"] = 4
    said = "4 instance(s) a rail could not check were not sent (RailUnverified)"
    assert f"**Refused:** {said}" in markdown_summary(report)
    page = render_html(report)
    assert said in page and "<dt>rail_unverified</dt>" not in page


def test_a_wait_that_met_an_outage_says_so() -> None:
    """Its Describe calls met no answer for a while: said beside what it saw, as for the
    run's own calls, though every instance got there in the end."""
    report = recorded_report()
    report.extra["wait"] = {"target": "stopped", "reached": 3, "outages": 1}
    text = markdown_summary(report)
    # Down, not "did not answer": an outage may be one of errors only.
    assert (
        "**Waited:** wait for stopped: 3 reached; the endpoint was down for a while (1 outage)\n"
        in text
    )
    report.extra["wait"] = {"target": "stopped", "reached": 3, "outages": 2, "timeouts": 1}
    assert (
        "wait for stopped: 3 reached; the endpoint was down for a while (2 outages), 1 call "
        "timed out\n"
    ) in markdown_summary(report)
    report.extra["wait"] = {"target": "stopped", "reached": 3, "outages": 0, "timeouts": 0}
    assert "**Waited:** wait for stopped: 3 reached\n" in markdown_summary(report)


def test_a_summary_the_disk_takes_only_part_of_is_not_left_cut_short(tmp_path: Path) -> None:
    """A file-size limit (the disk full, as a runner's is) past the page's start: the
    page is left as it was, not cut mid-row, and the reason is given."""
    import subprocess
    import sys

    page = tmp_path / "summary.md"
    page.write_text("### an earlier step\n\n| a | b |\n| --- | --- |\n")
    before = page.read_bytes()
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\n"
        "from swarm_cli.summary_md import append_step_summary\n"
        "from test_summary_md import recorded_report\n"
        "why = []\n"
        'env = {"GITHUB_STEP_SUMMARY": sys.argv[1]}\n'
        "print(append_step_summary(recorded_report(), env, why=why), why)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(page)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("None ['File too large']"), done.stdout
    assert page.read_bytes() == before


def test_a_rollbacks_finishing_command_is_a_block_to_copy() -> None:
    """Inline, with the warning sign after it, the command copied from the page failed
    ("unexpected extra argument"): it stands in a block of its own."""
    finish = "swarm rollback 'l.jsonl' --run r1 --endpoint-url http://127.0.0.1:1 --yes"
    undone = {
        "action": "start",
        "total": 3,
        "counts": {"succeeded": 2, "failed": 1, "missing": 0, "pending": 0},
        "finish": finish,
    }
    md = markdown_summary(replace(recorded_report(), extra={"rollback": undone}))
    assert "**Rolled back:** rollback (start): 2 of 3 undone, 1 failed ⚠️" in md
    assert f"To finish it:\n\n```sh\n{finish}\n```" in md
