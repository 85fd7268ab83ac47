"""A run's summary as GitHub-flavoured Markdown, for a workflow's step summary."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from bisect import bisect_right
from collections.abc import Mapping, Sequence

from .report import PairReport, Problem, Report, Sample, in_pairs
from .text import markdown_code, markdown_text, own_part

CHART_POINTS = 60  # x points of the window chart: enough for the sawtooth, little to read
CHART_PAIRS = 4  # lines in one chart; more would be a tangle
# Set explicitly so the legend under the chart can name each line's colour.
PALETTE = (("blue", "#1f77b4"), ("orange", "#ff7f0e"), ("green", "#2ca02c"), ("red", "#d62728"))
ORDER = ("failed", "pending", "missing")  # what needs doing first, first
MESSAGE_CHARS = 300  # of one message in the table (EC2's NotFound names every ID of a call)
CODE_CHARS = 80  # of an error code: EC2's are a few words; an endpoint's may be anything
NOTE_CHARS = 1000  # of what one note quotes (a fatal error's message, a follow-up)
PAIR_ROWS = 200  # pairs shown in the pairs table; the rest are counted
# GitHub refuses a step's summary over 1 MiB, and then shows none of it: past this, only
# the title, the notes and the counts are written.
SUMMARY_BYTES = 1024 * 1024


def cell(value: object) -> str:
    """A value shown literally inside a table cell (or any line): a pipe would end the
    cell, a newline the row, and markup or HTML would be rendered; see ``text``."""
    return "" if value is None else markdown_text(value)


def _cut(message: str | None, most: int = MESSAGE_CHARS) -> str | None:
    """A message cut to ``most`` characters (shown literally by ``cell``)."""
    if message is None or len(message) <= most:
        return message
    return message[: most - 1] + "…"


def _note(value: str | None) -> str:
    """What a note quotes, cut and shown literally: an error's message may be megabytes."""
    return cell(_cut(value, NOTE_CHARS))


def _number(value: float) -> str:
    return f"{round(value, 2):g}"


def cwnd_at(series: Sequence[Sample], times: Sequence[float]) -> list[float]:
    """The window at each time, the largest it was since the time before: a chart of a few
    dozen points then still shows each peak of the sawtooth. Before the first sample the
    window is 1 (the first call goes alone)."""
    values = []
    start = 0
    for t in times:
        end = bisect_right(series, t, key=lambda p: p.t)
        carried = series[start - 1].cwnd if start > 0 else 1.0
        values.append(max([carried, *(p.cwnd for p in series[start:end])]))
        start = max(start, end)
    return values


def mermaid_chart(pairs: Sequence[PairReport], points: int = CHART_POINTS) -> str | None:
    """cwnd over time, one line per pair, as a Mermaid ``xychart-beta``; None with no data."""
    drawn = [p for p in pairs if p.series][:CHART_PAIRS]
    end = max((p.series[-1].t for p in drawn), default=0.0)
    if not drawn or end <= 0:
        return None
    times = [end * k / (points - 1) for k in range(points)]
    lines = [cwnd_at(p.series, times) for p in drawn]
    top = max(max(values) for values in lines)
    colours = ", ".join(hex_ for _, hex_ in PALETTE[: len(drawn)])
    out = [
        "```mermaid",
        f'%%{{init: {{"themeVariables": {{"xyChart": {{"plotColorPalette": "{colours}"}}}}}}}}%%',
        "xychart-beta",
        '    title "Congestion window over time"',
        f'    x-axis "seconds" 0 --> {_number(end)}',
        f'    y-axis "cwnd (calls in flight allowed)" 0 --> {_number(top)}',
    ]
    out += [f"    line [{', '.join(_number(v) for v in values)}]" for values in lines]
    out.append("```")
    if len(drawn) > 1 or len(pairs) > len(drawn):
        legend = ", ".join(
            f"{name}: {cell(p.pair.label)}" for (name, _), p in zip(PALETTE, drawn, strict=False)
        )
        left_out = len(pairs) - len(drawn)
        rest = f"; {left_out} more pair(s) not drawn" if left_out else ""
        out += ["", f"Lines: {legend}{rest}"]
    return "\n".join(out)


def _title(report: Report) -> str:
    c = report.counts
    verb = "would succeed" if report.dry_run else "succeeded"
    parts = [f"{c['succeeded']} of {report.total} {verb}"]
    parts += [f"{c[status]} {status}" for status in ORDER if c[status]]
    unseen = report.unseen()
    if unseen:
        parts.append(f"{len(unseen)} not seen {report.extra['wait'].get('target', 'there')}")
    dry = " (dry run)" if report.dry_run else ""
    undoes = report.extra.get("undoes")
    runs = "runs" if undoes and ", " in undoes else "run"
    # A run's ID is what its ledger says: anyone's text.
    what = f"rollback of {runs} {cell(undoes)} ({report.action})" if undoes else report.action
    return f"## swarm {what}{dry}: {', '.join(parts)} in {report.elapsed_seconds:.1f}s"


def _notes(report: Report) -> list[str]:
    notes = []
    if report.fatal:
        fatal = report.fatal
        notes.append(
            f"**Stopped{in_pairs(report, cell)}:** {cell(_cut(fatal.code, CODE_CHARS))}: "
            f"{_note(fatal.message)}"
        )
    elif report.stopped:
        why = report.stopped.message or report.stopped.code
        notes.append(f"**Stopped early{in_pairs(report, cell)}:** {_note(why)}")
    if report.interrupted:
        notes.append(
            f"**Interrupted** by {cell(report.signal)}: what was not done is recorded as pending."
        )
    if report.ledger_error:
        notes.append(f"**Ledger not fully written:** {_note(report.ledger_error)}")
    from .display import STORM_WORDS, duration, follow_ups, refusal_text, unchecked_text

    refused = refusal_text(report)
    if refused:
        notes.append(f"**Refused:** {_note(refused.removeprefix('refused: '))}")
    unchecked = unchecked_text(report)
    if unchecked:
        notes.append(f"**Unchecked:** {_note(unchecked.removeprefix('unchecked: '))} ⚠️")

    heads = {
        "wait": "Waited",
        "rollback": "Rolled back",
        "rollback_wait": "Waited",
        "rollback_stopped": "Not rolled back",
    }
    for what, ok, line in follow_ups(report):
        # A command in it (a rollback's way to finish) goes in a block of its own, to copy.
        prose, _, command = line.partition("; to finish it: swarm ")
        note = f"**{heads[what]}:** {_note(prose)}" + ("" if ok else " ⚠️")
        if command:
            note += "\n\n" + "\n".join(_command_block("to finish it", f"swarm {command}"))
        notes.append(note)

    for p in report.pairs:
        if p.throttled_for is not None:
            where = (
                f" in {cell(p.account or '—')}/{cell(p.region)}" if len(report.pairs) > 1 else ""
            )
            notes.append(
                f"**Every call throttled**{where} for the last {duration(p.throttled_for)}: "
                f"{STORM_WORDS}."
            )
    return notes


def _next_steps(report: Report) -> list[str]:
    """What the terminal's summary says after the ledger's path (what failed for good, the
    command that retries or finishes what is left), for the page: a command in a block of
    its own, to copy as it is."""
    from .display import ledger_lines

    out: list[str] = []
    for text, _style in ledger_lines(report)[1:]:  # the first names the ledger, said above
        words, _, command = text.strip().partition(": swarm ")
        if command:
            out += [*_command_block(words, f"swarm {command}"), ""]
        else:
            out += [markdown_text(text.strip()), ""]
    return out


def _command_block(words: str, command: str) -> list[str]:
    """``words:`` then ``command`` in a block of its own (as text where a backtick in it
    would end the block)."""
    said = markdown_text(words[:1].upper() + words[1:])
    if "`" in command:
        return [f"{said}: {markdown_text(command)}"]
    return [f"{said}:", "", "```sh", command, "```"]


def _counts_table(report: Report) -> list[str]:
    c = report.counts
    unseen = report.unseen()
    target = report.extra.get("wait", {}).get("target", "there")
    waited = [(f"not seen {target} (--wait)", len(unseen))] if unseen else []
    unchanged = report.total_of("unchanged")
    rows = [
        ("succeeded", c["succeeded"]),
        *([("succeeded without a change (there already)", unchanged)] if unchanged else []),
        ("failed", c["failed"]),
        ("missing", c["missing"]),
        ("pending", c["pending"]),
        *waited,
        ("total", report.total),
        ("calls", report.total_of("calls")),
        ("throttled calls", report.total_of("throttled_calls")),
        ("error retries", report.total_of("retries")),
        ("calls timed out", report.total_of("timeouts")),
    ]
    return ["| | count |", "|---|---:|", *(f"| {name} | {n} |" for name, n in rows)]


def _pairs_table(report: Report) -> list[str]:
    head = [
        "| account | region | succeeded | failed | missing | pending | calls | throttled "
        "| peak cwnd |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [
        f"| {cell(p.account or '—')} | {cell(p.region)} | {p.counts['succeeded']} "
        f"| {p.counts['failed']} | {p.counts['missing']} | {p.counts['pending']} "
        f"| {p.calls} | {p.throttled_calls} | {_number(p.window.peak)} |"
        for p in report.pairs[:PAIR_ROWS]
    ]
    more = len(report.pairs) - PAIR_ROWS
    return (
        head
        + rows
        + (["", f"… and {more} more pairs (the JSON output lists them)."] if more > 0 else [])
    )


def _problems(
    problems: Sequence[Problem], limit: int, several: bool, has_ledger: bool, failed: bool
) -> list[str]:
    ranked = sorted(problems, key=lambda p: ORDER.index(p.status) if p.status in ORDER else 9)
    where = " account | region |" if several else ""
    out = [
        f"### Not done ({len(problems)})",
        "",
        f"| ID | status | code |{where} message |",
        "|---|---|---|" + ("---|---|" if several else "") + "---|",
    ]
    for p in ranked[:limit]:
        place = f" {cell(p.account or '—')} | {cell(p.region)} |" if several else ""
        message = _cut(own_part(p.message or "", p.id))
        code = cell(_cut(p.code, CODE_CHARS))
        out.append(f"| {cell(p.id)} | {cell(p.status)} | {code} |{place} {cell(message)} |")
    if len(problems) > limit:
        where = "see the ledger" if has_ledger else "the run wrote no ledger"
        if has_ledger and failed:
            where = "the ledger could not hold them all: see the run's log"
        out += ["", f"… and {len(problems) - limit} more ({where})."]
    return out


def markdown_summary(report: Report, *, max_failed: int = 50) -> str:
    """The run for a person reading a workflow's summary page."""
    out = [_title(report), ""]
    if report.endpoint:
        out += [f"Endpoint: {markdown_code(report.endpoint)}", ""]
    for note in _notes(report):
        out += [note, ""]
    out += [*_counts_table(report), ""]
    out += [*_pairs_table(report), ""]
    not_done = report.not_done()
    if not_done:
        out += [
            *_problems(
                not_done,
                max_failed,
                len(report.pairs) > 1,
                report.ledger is not None,
                bool(report.ledger_error),
            ),
            "",
        ]
    if report.ledger:
        out += [f"Ledger: {markdown_code(report.ledger)}", ""]
        out += _next_steps(report)
    # A run that sent nothing (a resume with all done) has no window to draw.
    chart = mermaid_chart(report.pairs) if report.total_of("calls") else None
    if chart:
        out += [chart, ""]
    return "\n".join(out)


def append_step_summary(
    report: Report,
    env: Mapping[str, str] = os.environ,
    *,
    max_failed: int = 50,
    why: list[str] | None = None,
) -> str | None:
    """Append the summary to the file GITHUB_STEP_SUMMARY names; the path, or None.

    None when the variable is unset or the file cannot be written (the reason then into
    ``why``): a summary page is a courtesy, so the caller warns and the run's outcome
    stands.
    """
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    text = markdown_summary(report, max_failed=max_failed) + "\n"
    try:
        there = os.stat(path).st_size
    except OSError:
        there = 0
    if there + len(text.encode()) > SUMMARY_BYTES:
        # What is there already (a plan's table) and this would pass GitHub's limit.
        short = [_title(report), "", *(f"{n}\n" for n in _notes(report)), *_counts_table(report)]
        text = "\n".join([*short, "", "(the rest is left out: the summary would pass 1 MiB)", ""])
        if there + len(text.encode()) > SUMMARY_BYTES:
            # Not even that fits: GitHub would show none of the page, what was there too.
            if why is not None:
                why.append(f"the page holds {there} bytes, and GitHub shows none past 1 MiB")
            return None
    return _append(path, text, why)


def append_ended_early(
    command: str,
    code: int,
    meaning: str,
    message: str | None,
    env: Mapping[str, str] = os.environ,
    why: list[str] | None = None,
) -> str | None:
    """A command that ended without a run's summary (a usage error, a rail's refusal,
    credentials): why, on the job's page too. The path, or None (the reason into
    ``why``)."""
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    lines = [f"## swarm {command}: exit {code} ({meaning})", ""]
    if message:
        # A fence longer than any run of backticks in the message: it shows as typed.
        longest = max((len(run) for run in re.findall("`+", message)), default=0)
        fence = "`" * max(3, longest + 1)
        lines += [fence + "text", *message.splitlines(), fence, ""]
    lines += ["The step's log says more.", ""]
    return _append(path, "\n".join(lines), why)


def _append(path: str, text: str, why: list[str] | None) -> str | None:
    """Append ``text`` to the page at ``path``, all of it or nothing: a page cut short
    mid-row, or inside a chart's fence, would break everything written after it."""
    fd: int | None = None
    kept = ""
    try:
        # O_NONBLOCK: a FIFO nobody reads is refused (ENXIO) instead of hanging the run.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path, flags, 0o666)  # a text file: not executable
        os.set_blocking(fd, True)
        # After a page whose last line has no end, a heading would not be one.
        data = memoryview((text if _ends_a_line(path) else "\n" + text).encode("utf-8"))
        before = os.fstat(fd)
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            if stat.S_ISREG(before.st_mode):
                try:
                    os.ftruncate(fd, before.st_size)
                except OSError:
                    kept = (
                        " (and what it took of it could not be taken back: the page is cut short)"
                    )
            raise
        # A disk that refuses the write only now (NFS) is a write refused too.
        closing: int = fd
        fd = None
        os.close(closing)
    except OSError as exc:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if why is not None:
            why.append((exc.strerror or str(exc)) + kept)
        return None
    return path


def _ends_a_line(path: str) -> bool:
    """Whether the file is empty or ends with a line's end (unreadable: taken as so)."""
    try:
        with open(path, "rb") as file:
            if file.seek(0, os.SEEK_END) == 0:
                return True
            file.seek(-1, os.SEEK_END)
            return file.read(1) == b"\n"
    except OSError:
        return True
