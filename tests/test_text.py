"""Text from the cloud is text: hostile tags, filters and messages through every view."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from swarm_cli.cli import app
from swarm_cli.display import LiveView, PlainLines, render_summary, status_line
from swarm_cli.html_report import render_html
from swarm_cli.report import PairReport, Problem, Reason, Report
from swarm_cli.sandbox import Sandbox
from swarm_cli.stats import Stats
from swarm_cli.summary_md import markdown_summary
from swarm_cli.text import html_text, literal, markdown_text, text

# Each would be rendered, hidden, linked, coloured or executed by a view that trusted it.
MARKUP = ["[/nope] closing", "[conceal]x", "[link=file:///etc/passwd]clk[/link]", "[red]X[/red]"]
HTML = "<b>html</b>"
CONTROL = ["a\x1b[2Jb", "bell\x07", "over\rwrite", "two\nlines", "rtl\u202eevil", "iso\u2066x"]
HOSTILE = [*MARKUP, HTML, *CONTROL]


def screen(width: int = 300) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


def shown(console: Console) -> str:
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_literal_makes_control_and_bidi_characters_visible() -> None:
    assert literal("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert literal("bell\x07") == "bell\\x07"
    assert literal("over\rwrite") == "over\\x0dwrite"
    assert literal("two\nlines") == "two\\x0alines"
    assert literal("rtl\u202eevil") == "rtl\\u202eevil"
    assert literal("\U000e0001") == "\\U000e0001"  # a tag character, unassigned in use
    assert literal("[red]X[/red] é ü 日本") == "[red]X[/red] é ü 日本"  # printable: unchanged
    assert literal(42) == "42"


def test_text_is_never_markup() -> None:
    console = screen()
    for value in MARKUP:
        console.print(text(value))
    out = shown(console)
    for value in MARKUP:
        assert value in out


def test_html_and_markdown_escapes() -> None:
    assert html_text("<b>x</b>\n\"'&") == "&lt;b&gt;x&lt;/b&gt;\\x0a&quot;&#x27;&amp;"
    md = markdown_text("[x](javascript:1) *a* `c` | <b> \x1b")
    assert "<" not in md and "\n" not in md and "\x1b" not in md
    assert "\\[x\\]" in md and "\\*a\\*" in md and "\\`c\\`" in md and "\\|" in md


def hostile_report(value: str) -> Report:
    row = PairReport(region="us-east-1", total=2, stopped=Reason("Stopped", value))
    row.counts.update(failed=1, pending=1)
    row.errors[value] = 1
    return Report(
        run="r1",
        action="terminate",
        endpoint=f"http://e/{value}",
        pairs=[row],
        problems=[
            Problem("i-1", "failed", value, value, "us-east-1"),
            Problem("i-2", "pending", "X", value),
        ],
        ledger=f"led{value}.jsonl",
        ledger_error=value,
        budget_spent=Reason("MaxErrors", value),
        exit_code=1,
    )


def assert_literal(out: str, value: str) -> None:
    assert literal(value) in out, (value, out)
    for bad in "\x1b\x07\r\u202e\u2066":
        assert bad not in out


@pytest.mark.parametrize("value", HOSTILE)
def test_the_summary_prints_messages_literally(value: str) -> None:
    console = screen()
    render_summary(hostile_report(value), console)
    out = shown(console)
    assert_literal(out, value)
    # One line per item: the problem's line holds the whole message.
    assert any(line.startswith("    i-1") and literal(value) in line for line in out.splitlines())


@pytest.mark.parametrize("value", HOSTILE)
def test_the_live_view_and_plain_lines_print_labels_and_reasons_literally(value: str) -> None:
    stats = Stats()
    stats.stopping = value
    stats.codes[value] = 1
    console = screen()
    view = LiveView(console, [(f"123456789012/{value}", stats)], f"t{value}", endpoint=value)
    console.print(view.render(now=1.0, width=300))
    out = shown(console)
    assert_literal(out, value)
    assert literal(value) in status_line(stats, 1.0)
    plain = screen()
    lines = PlainLines(plain, [("a", stats), (value, stats)], "terminate", interval=0.01)
    with lines:
        while "stopping" not in shown(plain):
            pass
    assert_literal(shown(plain), value)


@pytest.mark.parametrize("value", HOSTILE)
def test_the_step_summary_escapes_markdown_html_and_newlines(value: str) -> None:
    md = markdown_summary(hostile_report(value))
    assert f"**Stopped early:** {markdown_text(value)}" in md
    for bad in ("\x1b", "\x07", "\r", "\u202e"):
        assert bad not in md
    # Outside code spans and fenced blocks (where nothing is markup), brackets are escaped.
    unfenced = re.sub(r"^```[a-z]*\n.*?^```$", "", md, flags=re.S | re.M)
    assert unfenced != md  # the retry command's block was there, and is left out
    prose = "\n".join(line for line in unfenced.splitlines() if "`" not in line)
    assert not re.search(r"(?<!\\)[\[\]]", prose)
    assert "<" not in prose
    stopped = [line for line in md.splitlines() if line.startswith("**Stopped early:**")]
    assert len(stopped) == 1  # the message did not break the line


@pytest.mark.parametrize("value", HOSTILE)
def test_the_html_report_escapes(value: str) -> None:
    page = render_html(hostile_report(value))
    assert "<b>html</b>" not in page
    assert html_text(value) in page
    for bad in "\x1b\x07\r\u202e\u2066":
        assert bad not in page


# Over HTTP against the sandbox: what moto can carry in a tag (ESC and BEL it cannot).
THROUGH_MOTO = [*MARKUP, HTML, "two\nlines", "rtl\u202eevil"]


@pytest.fixture
def tagged(sandbox: Sandbox) -> list[str]:
    ids = sandbox.launch(len(THROUGH_MOTO))
    admin = sandbox.client()
    for instance_id, value in zip(ids, THROUGH_MOTO, strict=True):
        admin.create_tags(Resources=[instance_id], Tags=[{"Key": "Name", "Value": value}])
    return ids


def test_swarm_plan_shows_hostile_name_tags_literally(
    sandbox: Sandbox, tagged: list[str], tmp_path: Path
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(tagged) + "\n")
    result = CliRunner().invoke(
        app,
        ["plan", "terminate", "--ids", str(ids), "--endpoint-url", sandbox.endpoint],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    for value in THROUGH_MOTO:
        assert literal(value) in result.output, value
    assert "\u202e" not in result.output


def test_a_filter_and_list_with_markup_are_text(sandbox: Sandbox, tagged: list[str]) -> None:
    runner = CliRunner()
    for value in ("[/x]", "[/nope] closing"):
        result = runner.invoke(
            app,
            ["list", "--filter", f"tag:Name={value}", "--endpoint-url", sandbox.endpoint],
        )
        assert result.exit_code == 0, result.output
        assert f"tag:Name={value}" in result.output
    listed = runner.invoke(
        app,
        [
            "list",
            "--filter",
            "tag:Name=[conceal]x",
            "--endpoint-url",
            sandbox.endpoint,
            "-o",
            "json",
        ],
    )
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["instances"]
    assert [r["name"] for r in rows] == ["[conceal]x"]


def test_a_dry_run_with_a_hostile_filter_predicts_and_prints(
    sandbox: Sandbox, tagged: list[str]
) -> None:
    result = CliRunner().invoke(
        app,
        [
            "terminate",
            "--dry-run",
            "--filter",
            "tag:Name=[/nope] closing,[link=file:///etc/passwd]clk[/link]",
            "--endpoint-url",
            sandbox.endpoint,
        ],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    assert "[/nope] closing" in result.output
    assert "[link=file:///etc/passwd]clk[/link]" in result.output


def test_ledger_failed_prints_hostile_ledger_fields_literally(tmp_path: Path) -> None:
    from swarm_cli.ledger import LedgerWriter

    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "run1", "terminate", None)
    hostile = ["i-0123456789abcdef0\x1b[2J", "i-1\nrm -rf", "i-2\u202e", "[red]i-3[/red]"]
    writer.write_ahead(hostile, region="us-east-1", account=None, run_intents=len(hostile))
    writer.close()
    result = CliRunner().invoke(app, ["ledger", "failed", str(ledger)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines == [literal(i) for i in hostile]  # one line each, nothing raw


def test_swarm_sandbox_prints_a_path_with_brackets_literally(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    folder = tmp_path / "[" / "x] [red]"  # the path holds "[/x] [red]"
    folder.mkdir(parents=True)
    env_file, ids_file = folder / "sandbox.env", folder / "ids.txt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm_cli",
            "sandbox",
            "--port",
            "0",
            "--count",
            "2",
            "--ids-out",
            str(ids_file),
            "--env-out",
            str(env_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not env_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert f"IDs in {ids_file}" in err, err
    assert "Traceback" not in err


HOSTILE_MESSAGE = (
    "[/nope] [conceal]x [link=file:///etc/passwd]clk[/link] [red]X[/red] <b>html</b>\nrtl\u202e"
)


def test_an_api_error_message_is_literal_in_the_summary_step_summary_and_report(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = sandbox.launch(2)
    path = tmp_path / "ids.txt"
    path.write_text("\n".join(ids) + "\n")
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    sandbox.fail_action("TerminateInstances", 400, "OperationNotPermitted", HOSTILE_MESSAGE)
    result = CliRunner().invoke(
        app,
        [
            "terminate",
            "--ids",
            str(path),
            "--endpoint-url",
            sandbox.endpoint,
            "--yes",
            "--ledger",
            str(tmp_path / "l.jsonl"),
            "--progress",
            "plain",
            "--report",
            str(tmp_path / "r.html"),
        ],
    )
    assert result.exit_code == 1, result.output
    shown = literal(HOSTILE_MESSAGE)
    assert shown in result.stdout  # the summary, one line per instance
    assert sum(shown in line for line in result.stdout.splitlines()) == 2
    assert "\u202e" not in result.output
    md = step.read_text()
    assert markdown_text(HOSTILE_MESSAGE) in md and "<b>" not in md and "\u202e" not in md
    page = (tmp_path / "r.html").read_text()
    assert html_text(HOSTILE_MESSAGE) in page and "<b>html" not in page


@pytest.mark.parametrize("value", HOSTILE)
def test_the_confirmation_and_the_call_log_show_text_literally(value: str) -> None:
    from swarm_cli.events import Answered
    from swarm_cli.outcome import Kind, Outcome
    from swarm_cli.rails import confirmation_text
    from swarm_cli.report import Pair
    from swarm_cli.views import CallLog

    asked = confirmation_text(
        "terminate", 1, {f"r{value}": 1}, f"http://e/{value}", None, None, [("i-1", value)]
    )
    assert literal(value)[:40] in asked
    for bad in "\x1b\x07\r\u202e\u2066":
        assert bad not in asked
    assert len(asked.splitlines()) == 6  # header, 3 facts, "for example", one sample
    console = screen()
    log = CallLog(console, "terminate", Pair(None, "us-east-1"), several=False)
    answer = Outcome(Kind.PERMANENT, value, value)
    log(Answered(0.0, (value,), answer, 1, 1.0, 1.0, None, 0, "startup", 0.01, 1))  # type: ignore[arg-type]
    out = shown(console)
    assert_literal(out, value)
    assert len(out.splitlines()) == 1


def test_a_count_of_addresses_reads_addresses_not_addresss() -> None:
    from swarm_cli.text import one_or_more, plural

    assert one_or_more("snapshot") == "snapshot(s)" and plural("snapshot") == "snapshots"
    assert one_or_more("address") == "address(es)" and plural("address") == "addresses"


@pytest.mark.parametrize(
    "value",
    ["plain", "with space", "it's", "who=\u202eevil", "a\nb", "tab\there", "\x1b[31m", "é\u0085",
     "back\\slash\u200b'q'", "emoji \U0001f600\U000e0001", "raw\udcff"],
)  # fmt: skip
def test_a_word_of_a_command_shown_is_visible_and_runs_as_given(value: str) -> None:
    """A command swarm prints to run next (retry the rest, finish an undo) passes each
    argument as it was: one with a character shown escaped (a bidi override in a tag)
    was printed shlex-quoted and then escaped, and ran with the escape's text instead."""
    from swarm_cli.text import shell_quote

    word = shell_quote(value)
    assert word.isprintable() and word == literal(word)
    for locale in ("C.UTF-8", "C"):  # bash reads a \u escape by the locale
        done = subprocess.run(
            ["bash", "-c", f"printf %s {word}"],
            capture_output=True,
            check=True,
            env={**os.environ, "LC_ALL": locale},
        )
        assert done.stdout == value.encode("utf-8", "surrogateescape"), locale


def test_the_call_log_names_a_page_with_no_code_by_its_status_and_what_it_counted_as() -> None:
    from swarm_cli.events import Answered
    from swarm_cli.outcome import Kind, Outcome
    from swarm_cli.report import Pair
    from swarm_cli.views import CallLog

    console = screen()
    log = CallLog(console, "stop", Pair(None, "us-east-1"), several=False)
    empty = Outcome(Kind.THROTTLED, "HttpError", "empty body", 503)
    log(Answered(0.0, ("i-1",), empty, 1, 1.0, 1.0, None, 0, "paced", 0.01, 1))  # type: ignore[arg-type]
    coded = Outcome(Kind.THROTTLED, "RequestLimitExceeded", "slow down", 503)
    log(Answered(0.0, ("i-2",), coded, 1, 1.0, 1.0, None, 0, "paced", 0.01, 1))  # type: ignore[arg-type]
    first, second = shown(console).splitlines()
    assert " · HTTP 503 (throttled) · " in first, first
    assert " · RequestLimitExceeded · " in second, second
