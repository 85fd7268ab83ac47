"""A run's report as one HTML file to share: summary, charts per pair, the instances left over.

The file stands alone: inline CSS and SVG drawn here, no script, and a content
security policy that forbids loading anything, so it reads the same when mailed,
attached to a ticket or opened offline.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .files import create_fd
from .report import PairReport, Problem, Reason, Report, Sample
from .text import html_text, own_part, plural

MAX_PROBLEM_ROWS = 1000  # the ledger has them all; a page this long is already a lot
MESSAGE_CHARS = (
    500  # of one message (EC2's NotFound names every ID of a call): the ledger has it whole
)
CODE_CHARS = 80  # of an error code: EC2's are a few words; an endpoint's may be anything
NOTE_CHARS = 1000  # of a fatal error's message in a note

# Chart geometry, in SVG user units (the charts scale down with the page).
_WIDTH = 760
_HEIGHT = 250
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 18, 14, 44

# Nothing may be fetched: a shared report must not call home or pull in anyone's code.
_CSP = "default-src 'none'; style-src 'unsafe-inline'"

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body {
  margin: 0 auto; padding: 24px 28px 48px; max-width: 1080px;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #1f2328; background: #fff;
}
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 17px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 22px 0 6px; }
.sub { color: #59636e; margin: 0 0 16px; }
.headline { font-size: 16px; margin: 12px 0; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  font-weight: 600; vertical-align: 2px; margin-left: 6px; }
.ok { background: #dafbe1; color: #116329; }
.bad { background: #ffebe9; color: #a40e26; }
.warn { background: #fff8c5; color: #7d4e00; }
.notes { margin: 8px 0 0; padding-left: 20px; }
.notes li.bad, .notes li.warn { background: none; }
.notes li.bad { color: #a40e26; }
.notes li.warn { color: #7d4e00; }
dl.summary { display: grid; grid-template-columns: repeat(2, max-content minmax(0, 1fr));
  gap: 3px 18px; margin: 0; }
dl.summary dt { color: #59636e; }
dl.summary dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 7px; border-bottom: 1px solid #e5e8eb; text-align: left;
  vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; vertical-align: bottom; }
td.n, th.n { text-align: right; }
td.n, td.id, .nw { white-space: nowrap; }
td.msg { max-width: 460px; overflow-wrap: anywhere; }
code { overflow-wrap: anywhere; }
code, td.id { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 12.5px; }
figure { margin: 8px 0 18px; break-inside: avoid; }
figcaption { color: #59636e; font-size: 13px; margin-top: 2px; }
.legend { font-size: 13px; margin: 0 0 2px; }
.legend span { margin-right: 16px; white-space: nowrap; }
.key { display: inline-block; width: 18px; height: 0; border-top: 3px solid; margin-right: 5px;
  vertical-align: 4px; }
.key.dot { width: 9px; height: 9px; border: 0; border-radius: 50%; vertical-align: 0; }
svg.chart { display: block; width: 100%; max-width: 760px; height: auto; }
svg.chart text { font-size: 12px; fill: #59636e; font-family: inherit; }
svg.chart .grid line { stroke: #eaeef2; }
svg.chart .axis { stroke: #8c959f; }
svg.chart polyline { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
/* Scoped to the lines and legend keys: an SVG's text would inherit a stroke and blur. */
polyline.cwnd { stroke: #0969da; } .key.cwnd { border-color: #0969da; }
polyline.inflight { stroke: #bf8700; } .key.inflight { border-color: #bf8700; }
polyline.rate { stroke: #1a7f37; } .key.rate { border-color: #1a7f37; }
.key.mean { border-top-style: dashed; }
svg.chart line.mean { stroke: #1a7f37; stroke-dasharray: 5 4; opacity: .7; }
.throttles circle, .key.throttle { fill: #cf222e; background: #cf222e; opacity: .8; }
a { color: #0969da; }
@media print {
  body { padding: 0; max-width: none; font-size: 11pt; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  a { color: inherit; text-decoration: none; }
  .scroll { overflow: visible; }
  section.pair { break-before: auto; }
  h2, h3 { break-after: avoid; }
  tr { break-inside: avoid; }
}
"""


def render_html(report: Report, *, title: str | None = None) -> str:
    """The whole page; the same report gives the same bytes (no clock, no randomness)."""
    heading = title or f"swarm {report.action}" + (" (dry run)" if report.dry_run else "")
    span = _shared_span(report.pairs)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(heading)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{_e(heading)}</h1>",
        f'<p class="sub">run <code>{_e(report.run)}</code></p>',
        _summary(report),
        _pairs_table(report),
        *(_pair_section(i, row, span, _things(report)) for i, row in enumerate(report.pairs)),
        _problems(report),
        "</body>",
        "</html>",
        "",
    ]
    return "\n".join(parts)


def write_html(report: Report, path: str) -> None:
    """Write the page whole or not at all: a reader never opens half a report."""
    target = os.path.abspath(path)
    try:
        mode: int | None = stat.S_IMODE(os.stat(target, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        mode = None  # a new report gets the mode the umask gives
    base = f".{os.path.basename(target)}.{secrets.token_hex(8)}.tmp"
    temp = os.path.join(os.path.dirname(target), base)
    # O_EXCL and O_NOFOLLOW: the temp file is a new file of ours, never a link's target;
    # the rename then replaces a link at ``path`` rather than writing through it.
    fd = create_fd(temp, exclusive=True)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(render_html(report))
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


# --- summary -------------------------------------------------------------------------------


def _summary(report: Report) -> str:
    c = report.counts
    total = report.total
    verb = "would succeed" if report.dry_run else "succeeded"
    unseen = report.unseen()
    everything = c["succeeded"] == total and not unseen
    target = report.extra.get("wait", {}).get("target", "there")
    short = f", {len(unseen)} not seen {_e(target)}" if unseen else ""
    calls = report.total_of("calls")
    throttled = report.total_of("throttled_calls")
    unchanged = report.total_of("unchanged")
    status = "ok" if report.exit_code == 0 else "bad"
    headline = (
        f'<p class="headline"><strong>{_e(report.action)}</strong>: '
        f'<span class="badge {"ok" if everything else "warn"}">'
        f"{c['succeeded']} of {total} {verb}{short}</span> in {report.elapsed_seconds:.1f} s"
        f'<span class="badge {status}">exit {report.exit_code}</span></p>'
    )
    rows: list[tuple[str, str]] = [
        ("action", _e(report.action)),
        ("dry run", "yes" if report.dry_run else "no"),
        (_things(report), str(total)),
        *((name, str(n)) for name, n in c.items()),
        *([("succeeded without a change (there already)", str(unchanged))] if unchanged else []),
        *([(f"not seen {_e(target)} (--wait)", str(len(unseen)))] if unseen else []),
        ("elapsed", f"{report.elapsed_seconds:.1f} s"),
        ("calls", str(calls)),
        ("throttled", f"{throttled} ({_share(throttled, calls)} of calls)"),
        ("error retries", str(report.total_of("retries"))),
        ("time-outs", str(report.total_of("timeouts"))),
        ("outages", str(report.total_of("outages"))),
        ("pairs", str(len(report.pairs))),
        (
            "window",
            f"{_e(report.window_profile)}, batches of "
            + (f"auto (from {report.batch_size})" if report.auto_batch else str(report.batch_size)),
        ),
        ("endpoint", _e(report.endpoint) if report.endpoint else "AWS"),
        ("ledger", f"<code>{_e(report.ledger)}</code>" if report.ledger else "none"),
        ("exit code", str(report.exit_code)),
    ]
    for key, value in report.extra.items():
        if key in FOLLOW_UPS:
            continue  # in the notes, in words
        rows.append((_e(key), f"<code>{_e(json.dumps(value, sort_keys=True, default=str))}</code>"))
    listing = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    notes = _notes(report)
    return f'<section class="summary">{headline}<dl class="summary">{listing}</dl>{notes}</section>'


# What came after the run, said in the notes (``display.follow_ups``).
FOLLOW_UPS = frozenset(
    {"wait", "rollback", "rollback_stopped", "rail_unverified", "look_up_unchecked"}
)


def _notes(report: Report) -> str:
    """Why the run ended as it did: the lines a reader must not miss."""
    items: list[tuple[str, str]] = []
    if report.fatal:
        items.append(("bad", f"stopped: {_reason(report.fatal)}"))
    elif report.stopped:
        items.append(("warn", f"stopped early: {_reason(report.stopped)}"))
    if report.interrupted:
        items.append(
            (
                "warn",
                f"interrupted by {_e(report.signal)}: what was not done is recorded as pending",
            )
        )
    if report.gave_up:
        items.append(("bad", "gave up: the endpoint stayed unreachable"))
    from .display import follow_ups, refusal_text, unchecked_text

    refused = refusal_text(report)
    if refused:
        items.append(("bad", _e(refused)))
    unchecked = unchecked_text(report)
    if unchecked:
        items.append(("warn", _e(unchecked)))

    items += [
        ("ok" if ok else "bad", _e(_cut(line, NOTE_CHARS))) for _, ok, line in follow_ups(report)
    ]
    if report.ledger_error:
        error = _cut(report.ledger_error, NOTE_CHARS)
        items.append(("bad", f"ledger NOT fully written: {_e(error)}"))
    if report.unrecorded:
        items.append(("bad", f"{report.unrecorded} outcome(s) could not be recorded"))
    if not items:
        return ""
    lis = "".join(f'<li class="{cls}">{text}</li>' for cls, text in items)
    return f'<ul class="notes">{lis}</ul>'


def _reason(reason: Reason) -> str:
    code = _cut(reason.code or "", CODE_CHARS)
    message = _cut(reason.message or "", NOTE_CHARS)
    if code and message:
        return f"<code>{_e(code)}</code>: {_e(message)}"
    return _e(message or code or "unknown")


# --- pairs ---------------------------------------------------------------------------------

_PAIR_COLUMNS = (
    "pair",
    "total",
    "succeeded",
    "failed",
    "missing",
    "pending",
    "calls",
    "throttled",
    "error retries",
    "time-outs",
    "peak in flight",
    "window peak / final",
    "decreases",
    "elapsed",
)


def _pairs_table(report: Report) -> str:
    head = "".join(
        f"<th>{name}</th>" if name == "pair" else f'<th class="n">{name}</th>'
        for name in _PAIR_COLUMNS
    )
    body = "".join(_pair_row(i, row) for i, row in enumerate(report.pairs))
    return (
        "<h2>Pairs</h2>"
        f'<div class="scroll"><table class="pairs"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _pair_row(index: int, row: PairReport) -> str:
    w = row.window
    numbers = [
        row.total,
        *(row.counts.get(s, 0) for s in ("succeeded", "failed", "missing", "pending")),
        row.calls,
        f"{row.throttled_calls} ({_share(row.throttled_calls, row.calls)})",
        row.retries,
        row.timeouts,
        row.peak_in_flight,
        f"{w.peak:.0f} / {w.final:.0f}",
        w.decreases,
        f"{row.elapsed_seconds:.1f} s",
    ]
    cells = "".join(f'<td class="n">{n}</td>' for n in numbers)
    # Account IDs are long: the label may break after the account, never inside a number.
    # Nor inside a region or an ID, at a hyphen.
    label = "/<wbr>".join(
        f'<span class="nw">{_e(part)}</span>' for part in row.pair.label.split("/")
    )
    # The reasons are long: the pair's own section says them, the row only flags them.
    flag = ""
    if row.fatal or row.gave_up:
        flag = ' <span class="badge bad">stopped</span>'
    elif row.stopped:
        flag = ' <span class="badge warn">stopped early</span>'
    return f'<tr><td class="pair"><a href="#pair-{index}">{label}</a>{flag}</td>{cells}</tr>'


def _pair_notes(row: PairReport) -> str:
    items: list[tuple[str, str]] = []
    if row.fatal:
        items.append(("bad", f"stopped: {_reason(row.fatal)}"))
    elif row.stopped:
        items.append(("warn", f"stopped early: {_reason(row.stopped)}"))
    if row.gave_up:
        items.append(("bad", "gave up: the endpoint stayed unreachable"))
    if row.errors:
        codes = ", ".join(
            f"<code>{_e(_cut(code, CODE_CHARS))}</code> &times;{n}"
            for code, n in row.errors.items()
        )
        items.append(("", f"errors: {codes}"))
    lis = "".join(
        f'<li class="{cls}">{text}</li>' if cls else f"<li>{text}</li>" for cls, text in items
    )
    return f'<ul class="notes">{lis}</ul>' if items else ""


def _things(report: Report) -> str:
    """What the run acted on, for its tables and charts: "instances", "snapshots"."""
    from .display import noun_of

    noun = noun_of(report.action)
    return plural("ID" if noun == "resource" else noun)


def _pair_section(index: int, row: PairReport, span: float, things: str) -> str:
    throttles = _throttle_points(row.series)
    w = row.window
    caption = (
        f"window peak {w.peak:.0f}, final {w.final:.0f}, {w.decreases} decrease(s); "
        f"{row.throttled_calls} throttled call(s) of {row.calls}"
    )
    if row.series:
        charts = _window_figure(row.series, throttles, span, caption) + _rate_figure(
            row.series, span, things
        )
    else:
        charts = f'<p class="nochart">No points were recorded for this pair. {caption}.</p>'
    return (
        f'<section class="pair" id="pair-{index}" data-pair="{_e(row.pair.label)}">'
        f"<h3>{_e(row.pair.label)}</h3>{_pair_notes(row)}{charts}</section>"
    )


def _shared_span(pairs: Sequence[PairReport]) -> float:
    """One time axis for every pair, so charts side by side compare."""
    return max((row.series[-1].t for row in pairs if row.series), default=0.0)


# --- charts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Axis:
    """A linear map from data (starting at 0) to pixels, with its round ticks."""

    top: float
    ticks: tuple[float, ...]
    step: float

    @classmethod
    def of(cls, highest: float, count: int = 5) -> _Axis:
        highest = highest if highest > 0 else 1.0
        raw = highest / count
        magnitude = 10 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
        n = math.ceil(highest / step - 1e-9)
        return cls(n * step, tuple(i * step for i in range(n + 1)), step)

    def label(self, value: float) -> str:
        # As many decimals as the step needs: 0.25 s steps read 0.25, 0.50, 0.75.
        decimals = next(d for d in range(7) if abs(round(self.step, d) - self.step) < 1e-9)
        return f"{value:.{decimals}f}"


@dataclass(frozen=True)
class _Plot:
    x: _Axis
    y: _Axis

    def px(self, t: float) -> float:
        return _LEFT + t / self.x.top * (_WIDTH - _LEFT - _RIGHT)

    def py(self, v: float) -> float:
        return _HEIGHT - _BOTTOM - v / self.y.top * (_HEIGHT - _TOP - _BOTTOM)

    def points(self, data: Iterable[tuple[float, float]]) -> str:
        return " ".join(f"{self.px(t):.1f},{self.py(v):.1f}" for t, v in data)

    def frame(self, x_title: str, y_title: str) -> str:
        """Grid, axes, tick labels and axis titles."""
        bottom, right = _HEIGHT - _BOTTOM, _WIDTH - _RIGHT
        grid, labels = [], []
        for v in self.y.ticks:
            y = self.py(v)
            grid.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}"/>')
            labels.append(
                f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{self.y.label(v)}</text>'
            )
        for t in self.x.ticks:
            x = self.px(t)
            grid.append(f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{bottom}"/>')
            labels.append(
                f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{self.x.label(t)}</text>'
            )
        mid_y = (_TOP + bottom) / 2
        return (
            f'<g class="grid">{"".join(grid)}</g>'
            f'<g class="axes"><line class="axis" x1="{_LEFT}" y1="{bottom}" x2="{right}" '
            f'y2="{bottom}"/><line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" '
            f'y2="{bottom}"/></g>'
            f'<g class="ticks">{"".join(labels)}</g>'
            f'<text class="xlabel" x="{(_LEFT + right) / 2:.0f}" y="{_HEIGHT - 6}" '
            f'text-anchor="middle">{_e(x_title)}</text>'
            f'<text class="ylabel" x="14" y="{mid_y:.0f}" text-anchor="middle" '
            f'transform="rotate(-90 14 {mid_y:.0f})">{_e(y_title)}</text>'
        )


def _svg(kind: str, label: str, body: str) -> str:
    return (
        f'<svg class="chart {kind}" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" role="img" aria-label="{_e(label)}">'
        f"<title>{_e(label)}</title>{body}</svg>"
    )


def _throttle_points(series: Sequence[Sample]) -> list[tuple[Sample, int]]:
    """Each sample at which the throttled counter rose, and by how much."""
    out: list[tuple[Sample, int]] = []
    before = 0
    for s in series:
        if s.throttled > before:
            out.append((s, s.throttled - before))
        before = max(before, s.throttled)
    return out


def _window_figure(
    series: Sequence[Sample], throttles: Sequence[tuple[Sample, int]], span: float, caption: str
) -> str:
    # Time runs along the long side of the chart: it has room for more ticks.
    plot = _Plot(
        _Axis.of(span, count=8),
        _Axis.of(max(max(s.cwnd for s in series), max(s.in_flight for s in series))),
    )
    marks = "".join(
        f'<circle cx="{plot.px(s.t):.1f}" cy="{plot.py(s.cwnd):.1f}" r="3.2">'
        f"<title>throttled at {s.t:.2f} s (+{n}), window {s.cwnd:.0f}</title></circle>"
        for s, n in throttles
    )
    body = (
        plot.frame("time (s)", "calls")
        + f'<polyline class="inflight" points="{plot.points((s.t, s.in_flight) for s in series)}"/>'
        + f'<polyline class="cwnd" points="{plot.points((s.t, s.cwnd) for s in series)}"/>'
        + f'<g class="throttles">{marks}</g>'
    )
    legend = (
        '<p class="legend"><span><i class="key cwnd"></i>window (cwnd)</span>'
        '<span><i class="key inflight"></i>calls in flight</span>'
        f'<span><i class="key dot throttle"></i>throttled ({len(throttles)} point(s))</span></p>'
    )
    return (
        f'<figure class="window">{legend}'
        f"{_svg('window', 'window and calls in flight over time', body)}"
        f"<figcaption>{caption}</figcaption></figure>"
    )


def rates(series: Sequence[Sample], width: float) -> list[tuple[float, float]]:
    """Instances done per second over the ``width`` seconds before each sample.

    Before the start nothing was done, so early points divide by the full width
    rather than by the little time elapsed: no spike from two close samples.
    """
    out: list[tuple[float, float]] = []
    j = 0
    for i, s in enumerate(series):
        while j < i and s.t - series[j + 1].t >= width:
            j += 1
        dt = max(s.t - series[j].t, width)
        out.append((s.t, (s.done - series[j].done) / dt))
    return out


def _rate_figure(series: Sequence[Sample], span: float, things: str) -> str:
    own = series[-1].t
    # About thirty windows across the run: smooth enough to read, short enough to see dips.
    width = max(own / 30, 0.5)
    points = rates(series, width)
    # From the first point: IDs settled unsent at the start (a rail, a resume) are no rate.
    mean = (series[-1].done - series[0].done) / own if own > 0 else 0.0
    plot = _Plot(_Axis.of(span, count=8), _Axis.of(max(max(r for _, r in points), mean)))
    body = plot.frame("time (s)", f"{things} / s")
    if own > 0:
        y = plot.py(mean)
        body += (
            f'<line class="mean" x1="{plot.px(0):.1f}" y1="{y:.1f}" x2="{plot.px(own):.1f}" '
            f'y2="{y:.1f}"><title>mean {mean:.1f} per second</title></line>'
        )
    body += f'<polyline class="rate" points="{plot.points(points)}"/>'
    legend = (
        # Every answer settles its IDs: failed and missing ones too, as the progress counts.
        f'<p class="legend"><span><i class="key rate"></i>{things} answered per second '
        f"(over {width:.1f} s)</span>"
        f'<span><i class="key rate mean"></i>mean {mean:.1f}/s'
        "</span></p>"
    )
    return (
        f'<figure class="rate">{legend}'
        f"{_svg('rate', f'{things} answered per second over time', body)}</figure>"
    )


# --- problems ------------------------------------------------------------------------------


def _problems(report: Report) -> str:
    problems = report.not_done()
    things = _things(report)
    # Not done as the ledger says: what failed or is missing, and what is pending (a call
    # whose answer was lost, or accepted but not seen there by its --wait).
    heading = f"{things[:1].upper()}{things[1:]} not done"
    if not problems:
        return f'<h2>{heading}</h2><p class="none">None.</p>'
    rows = "".join(_problem_row(p) for p in problems[:MAX_PROBLEM_ROWS])
    more = ""
    if len(problems) > MAX_PROBLEM_ROWS:
        if report.ledger_error:
            where = "the ledger could not hold them all: --output json lists all"
        elif report.ledger:
            where = f"see the ledger <code>{_e(report.ledger)}</code>"
        else:
            where = "the run wrote no ledger: --output json lists all"
        more = f'<p class="more">… and {len(problems) - MAX_PROBLEM_ROWS} more, {where}.</p>'

    columns = ("id", "region", "account", "status", "code", "message")
    head = "".join(f"<th>{h}</th>" for h in columns)
    return (
        f"<h2>{heading} ({len(problems)})</h2>"
        f'<div class="scroll"><table class="problems"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>{more}"
    )


def _problem_row(p: Problem) -> str:
    message = _cut(own_part(p.message or "", p.id))
    cells = (
        f'<td class="id">{_e(p.id)}</td><td>{_e(p.region or "")}</td>'
        f'<td>{_e(p.account or "")}</td><td class="status {_e(p.status)}">{_e(p.status)}</td>'
        f"<td><code>{_e(_cut(p.code or '', CODE_CHARS))}</code></td>"
        f'<td class="msg">{_e(message)}</td>'
    )
    return f"<tr>{cells}</tr>"


def _cut(message: str, most: int = MESSAGE_CHARS) -> str:
    return message if len(message) <= most else message[: most - 1] + "…"


# --- helpers -------------------------------------------------------------------------------


def _e(text: object) -> str:
    # Literal first (control and bidi characters made visible), then escaped for HTML.
    return html_text(text)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0%"
