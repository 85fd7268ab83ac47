"""What a person sees: a live view on a terminal, plain lines in CI, and the summary."""

from __future__ import annotations

import math
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from rich.console import Console, Group, RenderableType
from rich.text import Text

from .actions import ACTIONS
from .ledger import FINAL_SUCCESS, IN_TRANSITION_CODE
from .ledger.writer import MOVED
from .report import Pair, Report, Sample, in_pairs
from .run import ProgressMode as ProgressMode
from .states import PASSING_TO, REFUSED_ON_THE_WAY
from .stats import (
    FALL_LASTING,
    FALL_SHARE,
    RATE_SPAN,
    STORM_LASTING,
    Fall,
    RateWatch,
    Snapshot,
    Stats,
)
from .text import clip, literal, one_or_more, own_part, shell_quote

SPARKS = "▁▂▃▄▅▆▇█"
PLAIN_INTERVAL = 2.0  # seconds between plain lines when neither flag nor env says
INTERVAL_ENV = "SWARM_PROGRESS_INTERVAL"
MAX_PAIRS = 8  # blocks shown at once; the rest are summed on one line
GUTTER = 6  # the chart's left margin, where its scale is written
PHASE_STYLES = {
    "canary": "blue",
    "startup": "green",
    "slow-start": "green",
    "avoidance": "cyan",
    "recovery": "yellow",
    "paced": "magenta",
    "outage": "bold red",
}
# What the controller's terms mean, in words, in one place: the live view, the plain lines
# and their legend read these. A phase missing here is shown under its own name.
PHASE_WORDS = {
    "canary": "one call first, to check access",
    "startup": "starting: paced, doubling each round trip",
    "slow-start": "starting: doubling each round trip",
    "avoidance": "growing while answers come",
    "recovery": "backing off after a throttle",
    "paced": "paced at the rate that gets through, probing for more",
    "outage": "endpoint not answering: probing",
}
ALLOWED = "allowed in flight"  # the window (TCP's cwnd): calls that may be out at once
IN_FLIGHT = "in flight"  # calls sent and not answered yet
# One line under the live view's header; it fits 80 columns.
LEGEND = "allowed in flight = calls swarm may send at once · in flight = awaiting answers"
# What a fall of the rate means, in words: see stats.RateWatch.
FELL_WORDS = "throttles that do not answer to slowing down"
STORM_WORDS = "the account's limit is taken by other callers, or the API refuses calls for now"
# One style for the whole chart: the line and the area read by their shapes, and a
# style per cell would cost rich more than everything else on the screen.
CHART_STYLE = "cyan"


class Progress(Protocol):
    def __enter__(self) -> Progress: ...
    def __exit__(self, *exc: object) -> None: ...


def noun_of(action: str) -> str:
    """What ``action`` acts on: ``instance``, or ``snapshot`` for ``delete-snapshot``."""
    from .actions.operations import RESOURCE_OPERATIONS

    op = RESOURCE_OPERATIONS.get(action)
    return op.resource if op is not None else "instance"


def command_of(action: str) -> str:
    """The command that runs ``action``: ``stop``, or ``ec2 delete-snapshot``."""
    from .actions.operations import RESOURCE_OPERATIONS

    return f"ec2 {action}" if action in RESOURCE_OPERATIONS else action


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


def _snap(stats: Stats | Snapshot) -> Snapshot:
    return stats.snapshot() if isinstance(stats, Stats) else stats


def window_text(stats: Stats | Snapshot) -> str:
    """The window as a person reads it: a paced window is under one call in flight. A
    pace under a hundredth of a second reads as calls a second ("one call per 0.00s"
    says nothing)."""
    if stats.pace and stats.pace < 0.01:
        return f"{stats.cwnd:.0f} {ALLOWED}, up to {1 / stats.pace:,.0f} calls a second"
    if stats.pace:
        return f"{stats.cwnd:.0f} {ALLOWED}, one call per {stats.pace:.2f}s"
    return f"{stats.cwnd:.0f} {ALLOWED}"


def phase_text(phase: str | None) -> str:
    """The controller's phase in words (its own name when it has none here)."""
    if not phase:
        return "starting"
    return PHASE_WORDS.get(phase, phase)


# A call unanswered this long is worth a word while it lasts.
WAITING_WORTH = 5.0


def status_line(stats: Stats | Snapshot, now: float | None = None) -> str:
    s = _snap(stats)
    elapsed = s.elapsed() if now is None or s.started is None else now - s.started
    line = (
        f"{s.done}/{s.total} done · {window_text(s)} · {s.in_flight} {IN_FLIGHT}"
        f" · calls {s.calls} · throttled {s.throttled_calls}"
        f" · failed {s.failed}" + (f" · missing {s.missing}" if s.missing else "")
    )
    if s.timeouts:
        line += f" · timed out {s.timeouts}"
    line += f" · {elapsed:.1f}s"
    if s.outage_since is not None:
        down = (now if now is not None else s.last) - s.outage_since
        line += f" · OUTAGE: {literal(s.outage)}, probing ({down:.0f}s)"
    elif (waiting := waiting_text(s, now)) is not None:
        line += f" · {waiting}"
    storm = storm_text(s, now if now is not None else s.last)
    if storm and not s.stopping:
        line += f" · {storm}"
    if s.stopping:
        line += f" · stopping: {literal(s.stopping)}"
    return line


def waiting_text(s: Snapshot, now: float | None) -> str | None:
    """A call on its way with no answer for a while, in words (None: none such): an
    endpoint that hangs shows here before enough calls go unanswered to make an outage."""
    if now is None or s.waiting_since is None or now - s.waiting_since < WAITING_WORTH:
        return None
    if _settled(s):
        return None  # stopped: nothing more is awaited
    return f"no answer for {duration(now - s.waiting_since)}"


def duration(seconds: float) -> str:
    """A span as a person reads it: 42s, 3m07s, 1h05m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def recent_rate(snap: Snapshot, t_now: float, span: float = RATE_SPAN) -> float | None:
    """Intents done per second over the last ``span`` seconds; None before a second has passed.

    What was done before the span is read at the first point inside it: a point is taken
    as an answer arrives, before the answer's outcomes count. With no point in the span,
    nothing was answered in it, and the rate is nil.
    """
    if t_now < 1.0:
        return None
    since = max(0.0, t_now - span)
    before = 0
    if since > 0.0:
        i = bisect_right(snap.series, since, key=lambda p: p.t)
        before = snap.series[i].done if i < len(snap.series) else snap.done
    return max(0, snap.done - before) / (t_now - since)


def storm_text(s: Snapshot, now: float) -> str | None:
    """Every answer a throttle for STORM_LASTING seconds or more, as a person reads it."""
    if s.throttled_since is None or now - s.throttled_since < STORM_LASTING:
        return None
    return (
        f"every call throttled for {duration(now - s.throttled_since)}: {STORM_WORDS}; "
        "nothing is lost, swarm goes on probing"
    )


def batch_words(report: Report) -> str:
    """What a storm may owe to a fixed batch of several IDs where calls spend instance
    tokens: each call needs that many at once, which a bucket smaller than that never
    holds (``auto`` halves itself there)."""
    spec = ACTIONS.get(report.action)
    if report.auto_batch or report.batch_size <= 1 or spec is None or not spec.limits.instances:
        return ""
    return (
        f"; or calls of {report.batch_size} IDs need more instance tokens at once than the "
        "bucket holds (a smaller --batch-size, or auto, gets by)"
    )


def fall_text(fall: Fall, now_rate: float | None = None, why: str = FELL_WORDS) -> str:
    """A pair's rate that fell far below its best, as a person reads it."""
    low = fall.low if now_rate is None else now_rate
    return f"rate fell to {per_second(low)} from {per_second(fall.best)}: {why}"


def refusal_text(report: Report) -> str | None:
    """What a rail that could not see refused (exit 3), in words; None if nothing."""
    unverified = report.extra.get("rail_unverified")
    if not unverified:
        return None
    return (
        f"refused: {unverified} {one_or_more(noun_of(report.action))} a rail could not check "
        "were not sent (RailUnverified)"
    )


def unchecked_text(report: Report) -> str | None:
    """What a reboot's look-up could not read and sent all the same, in words; None if
    nothing."""
    unchecked = report.extra.get("look_up_unchecked")
    if not unchecked:
        return None
    from .actions import ACTIONS

    spec = ACTIONS.get(report.action)
    verb = spec.verb if spec is not None else "done"
    return (
        f"unchecked: {unchecked} {one_or_more(noun_of(report.action))} could not be looked "
        f"up and were sent: a terminated one among them is recorded {verb} "
        "(EC2 answers success), and the exit code does not show it"
    )


def per_second(rate: float) -> str:
    """A rate of IDs per second as a person reads it: one decimal, or under one a second
    two figures (a refill of 0.5/s is not "0.0/s")."""
    return f"{rate:.1f}/s" if rate >= 0.95 or rate == 0 else f"{rate:.2g}/s"


def unanswered_text(outages: int, timeouts: int) -> str | None:
    """A pair's stretches with no answer from the endpoint, in words (None: there were
    none). A fall of the rate over them is theirs, not the throttles'."""
    parts = []
    if outages:
        parts.append(f"{outages} outage" + ("s" if outages > 1 else ""))
    if timeouts:
        parts.append(f"{timeouts} call" + ("s" if timeouts > 1 else "") + " timed out")
    if not parts:
        return None
    return f"the endpoint did not answer for a while ({', '.join(parts)})"


def fall_cause(outages: int, timeouts: int, stood_still: float) -> str:
    """Why a pair's rate fell, in words: the process standing still, stretches with no
    answer, or else the throttles."""
    parts = []
    # A stand-still shorter than a fall lasts at the least makes none alone.
    if stood_still >= FALL_LASTING:
        parts.append(
            f"this process stood still for {duration(stood_still)} (stopped with Ctrl-Z, or "
            "its machine suspended or starved of CPU)"
        )
    if (unanswered := unanswered_text(outages, timeouts)) is not None:
        parts.append(unanswered)
    return "; ".join(parts) or FELL_WORDS


def _cell_bits(dots: tuple[int, int, int, int]) -> list[int]:
    """Braille bits for each 4-bit column pattern (bit i: the i-th dot from the bottom)."""
    return [sum(dots[3 - i] for i in range(4) if pattern >> i & 1) for pattern in range(16)]


# A braille cell is 2 dots wide and 4 high; these are its dots' bits, top row first.
LEFT_BITS = _cell_bits((0x01, 0x02, 0x04, 0x40))
RIGHT_BITS = _cell_bits((0x08, 0x10, 0x20, 0x80))
# The cell for each pair of 4-dot columns (left << 4 | right); a blank is a space.
CELLS = [
    chr(0x2800 | LEFT_BITS[pair >> 4] | RIGHT_BITS[pair & 15]) if pair else " "
    for pair in range(256)
]


class Chart(NamedTuple):
    rows: list[str]  # braille, top row first
    marks: str  # one character per column: "^" where a call was throttled
    top: float  # the value of the top dot row


class SeriesArrays:
    """A series as parallel lists, extended in place as it grows.

    A view charts up to 2000 points per pair eight times a second; rebuilding these
    lists at each refresh would cost more than drawing the chart.
    """

    def __init__(self, series: Sequence[Sample] = ()) -> None:
        self.t: list[float] = []
        self.cwnd: list[float] = []
        self.in_flight: list[int] = []
        self.throttled: list[int] = []
        self._last: Sample | None = None
        self.update(series)

    def update(self, series: Sequence[Sample]) -> SeriesArrays:
        n = len(self.t)
        # Stats only appends, or halves the whole series: then the old last point has moved.
        if not n or len(series) < n or series[n - 1] is not self._last:
            self.t, self.cwnd, self.in_flight, self.throttled = [], [], [], []
            n = 0
        tail = series[n:]
        self.t += [p.t for p in tail]
        self.cwnd += [p.cwnd for p in tail]
        self.in_flight += [p.in_flight for p in tail]
        self.throttled += [p.throttled for p in tail]
        self._last = series[-1] if series else None
        return self


def window_chart(
    series: Sequence[Sample] | SeriesArrays, t_end: float, width: int, height: int = 3
) -> Chart:
    """cwnd (a line) over in-flight calls (a filled area), braille, ``width`` x ``height``.

    Each dot column spans a slice of the run; the line covers the lowest to the highest
    window in it, so a halving shows as a drop and the sawtooth survives resampling.
    """
    arrays = series if isinstance(series, SeriesArrays) else SeriesArrays(series)
    ts, cw, fl, thr = arrays.t, arrays.cwnd, arrays.in_flight, arrays.throttled
    cols = width * 2
    dots = height * 4
    top = max(max(cw, default=0.0), max(fl, default=0), 1.0)
    scale = dots / top
    line_masks = [0] * cols
    fill_masks = [0] * cols
    throttles = [0] * width
    step = max(t_end, 1e-9) / cols
    i = 0  # first sample not yet in a column; the one before it carries into the next
    for x in range(cols):
        j = bisect_right(ts, (x + 1) * step, i)
        if j == 0:
            continue  # nothing sampled yet
        start = i - 1 if i else 0
        if j - start == 1:  # one value over the whole column: the common case when zoomed in
            lo = hi = int(cw[start] * scale + 0.5)
            fill = int(fl[start] * scale + 0.5)
        else:
            lo = int(min(cw[start:j]) * scale + 0.5)
            hi = int(max(cw[start:j]) * scale + 0.5)
            fill = int(max(fl[start:j]) * scale + 0.5)
        if j > i:
            throttles[x >> 1] += thr[j - 1] - (thr[i - 1] if i else 0)
        lo = lo - 1 if lo else 0
        hi = hi - 1 if hi else 0
        line_masks[x] = ((2 << (hi - lo)) - 1) << lo
        fill_masks[x] = (1 << fill) - 1
        i = j
    dots_of = [line | fill for line, fill in zip(line_masks, fill_masks, strict=True)]
    left, right = dots_of[0::2], dots_of[1::2]
    rows = []
    for r in range(height):
        shift = (height - 1 - r) * 4
        rows.append(
            "".join(
                [
                    CELLS[(a >> shift & 15) << 4 | b >> shift & 15]
                    for a, b in zip(left, right, strict=True)
                ]
            )
        )
    marks = "".join("^" if n else " " for n in throttles)
    return Chart(rows, marks, top)


def _pack(parts: Sequence[Text], width: int, indent: str = "  ") -> list[Text]:
    """Parts joined by " · ", wrapped between parts (never inside one) to fit ``width``."""
    lines: list[Text] = []
    line = Text(indent)
    for part in parts:
        fresh = line.plain == indent
        if not fresh and line.cell_len + 3 + part.cell_len > width:
            lines.append(line)
            line, fresh = Text(indent), True
        if not fresh:
            line.append(" · ")
        line.append_text(part)
    if line.plain != indent:
        lines.append(line)
    return lines


def _bar(done: int, total: int, width: int) -> Text:
    # Two glyphs, not two colours: the bar still reads without colour.
    filled = width * done // total if total else 0
    return Text.assemble(("━" * filled, "green"), ("─" * (width - filled), "bright_black"))


Rows = list[tuple[str, Stats]]  # (pair label, its counters), one per window


class LiveView:
    """A rich Live view that reads the stats at each refresh: one block per window.

    Each refresh takes a snapshot of every pair's stats under its lock and draws
    from the copies only, so the workers are held up for a copy and no longer.
    """

    def __init__(
        self,
        console: Console,
        rows: Rows,
        title: str,
        *,
        endpoint: str | None = None,
        badges: Sequence[str] = (),
        batch: int | None = None,
        bound_rate: float | None = None,
        already_done: int = 0,
        refresh_per_second: float = 8,
    ) -> None:
        self.console = console
        self.rows = rows
        self.title = title
        self.endpoint = endpoint
        self.badges = tuple(badges)
        self.batch = batch
        self.bound_rate = bound_rate
        self.already_done = already_done
        # Kept from one refresh to the next; rich's Live renders under its lock, one at a time.
        self._arrays = [SeriesArrays() for _ in rows]
        self._rates = [RateWatch() for _ in rows]
        self._charts: dict[int, tuple[tuple[object, ...], Chart]] = {}
        self._refresh_per_second = refresh_per_second
        self._live = self._new_live()
        self._suspend_was: Any = None  # the SIGTSTP handler before the view's

    def _new_live(self) -> Any:
        from rich.live import Live  # only a terminal gets the live view

        return Live(
            get_renderable=self._render,
            console=self.console,
            refresh_per_second=self._refresh_per_second,
            transient=False,
        )

    def _render(self) -> RenderableType:
        return self.render()

    def _suspend(self, signum: int, frame: object) -> None:
        """Ctrl-Z: the view stops where it is and gives the cursor back, the process
        stops; at fg, a view starts below what the shell printed meanwhile (the old one
        would move up over it)."""
        import signal

        self._live.stop()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signal.SIGTSTP)  # until SIGCONT
        finally:
            signal.signal(signal.SIGTSTP, self._suspend)
            self._live = self._new_live()
            self._live.start()

    def render(self, now: float | None = None, width: int | None = None) -> RenderableType:
        """The whole view at ``now`` (the engine's clock; default: the monotonic clock)."""
        now = time.monotonic() if now is None else now
        width = max(40, width or self.console.width)
        snaps = [(label, s.snapshot()) for label, s in self.rows]
        lines = self._header(snaps, now, width)
        several = len(snaps) > 1
        # Several pairs get compact blocks, as many as the screen holds (at most 8), the
        # ones still moving first; the screen keeps their order.
        room = self.console.height - len(lines) - 1
        blocks: dict[int, list[Text]] = {}
        for k in sorted(range(len(snaps)), key=lambda k: (_settled(snaps[k][1]), k)):
            label, snap = snaps[k]
            arrays = self._arrays[k].update(snap.series)
            fall = self._rates[k].update(snap.series, snap.total).falling
            block = self._block(
                label, snap, arrays, now, width, height=2 if several else 3, fall=fall
            )
            if blocks and (len(blocks) == MAX_PAIRS or len(block) > room):
                break
            blocks[k] = block
            room -= len(block)
        for k in sorted(blocks):
            lines += blocks[k]
        rest = [snap for k, (_, snap) in enumerate(snaps) if k not in blocks]
        if rest:
            lines.append(
                Text(
                    f"… and {len(rest)} more: {sum(s.done for s in rest)}/"
                    f"{sum(s.total for s in rest)} done · throttled "
                    f"{sum(s.throttled_calls for s in rest)} · failed "
                    f"{sum(s.failed + s.missing for s in rest)}",
                    style="dim",
                )
            )
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
        return Group(*lines)

    def _header(self, snaps: list[tuple[str, Snapshot]], now: float, width: int) -> list[Text]:
        head = Text()
        head.append(f"swarm {literal(self.title)}", "bold")
        if len(snaps) == 1:
            head.append(f" · {literal(snaps[0][0])}")
        else:
            regions = list(dict.fromkeys(literal(label.rsplit("/", 1)[-1]) for label, _ in snaps))
            listed = ", ".join(regions[:4]) + (f" +{len(regions) - 4}" if len(regions) > 4 else "")
            head.append(f" · {len(snaps)} pairs in {listed}")
        if self.endpoint:
            head.append(f" · {literal(self.endpoint)}", "dim")
        for badge in self.badges:
            head.append(" ")
            head.append(f" {badge} ", "bold reverse yellow")
        done = sum(s.done for _, s in snaps)
        total = sum(s.total for _, s in snaps)
        starts = [s.started for _, s in snaps if s.started is not None]
        parts = [Text(f"{done}/{total} done" + (f" ({100 * done // total}%)" if total else ""))]
        if self.already_done:
            parts.append(Text(f"{self.already_done} already done per the ledger"))
        if starts:
            # Once every pair is through, the clock stops at the last outcome.
            end = max(s.last for _, s in snaps) if all(_settled(s) for _, s in snaps) else now
            parts.append(Text(duration(end - min(starts))))
        parts.append(
            Text.assemble(
                ("⠉", CHART_STYLE),
                f" {ALLOWED}  ",
                ("⣿", CHART_STYLE),
                f" {IN_FLIGHT}  ",
                ("^", "yellow"),
                " throttled",
            )
        )
        return [head, *_pack(parts, width, indent=""), Text(LEGEND, "dim")]

    def _block(
        self,
        label: str,
        s: Snapshot,
        arrays: SeriesArrays,
        now: float,
        width: int,
        height: int,
        fall: Fall | None = None,
    ) -> list[Text]:
        settled = _settled(s)
        # A finished pair's clock stops with it.
        t_now = s.elapsed() if settled or s.started is None else max(0.0, now - s.started)
        if s.series:
            t_now = max(t_now, s.series[-1].t)
        bar_width = max(10, min(40, width - len(label) - 24))
        title = Text.assemble((literal(label), "bold"), " ", _bar(s.done, s.total, bar_width))
        title.append(f" {s.done}/{s.total} done")
        if s.total:
            title.append(f" {100 * s.done // s.total}%")

        state = [Text(phase_text(s.phase), PHASE_STYLES.get(s.phase, ""))]
        state.append(Text(window_text(s)))
        if s.phase == "slow-start":
            state.append(Text(f"doubling up to {s.ssthresh:.0f}"))
        state.append(Text(f"{s.in_flight} {IN_FLIGHT}"))
        if self.batch is not None:
            state.append(Text(f"batch {self.batch}"))
        elif s.batch:
            state.append(Text(f"batch {s.batch} (auto)"))
        state.append(Text(f"peak {s.peak_cwnd:.0f} allowed"))

        speed: list[Text] = []
        rate = (s.done / t_now if t_now else None) if settled else recent_rate(s, t_now)
        bound = f" of {self.bound_rate:g}/s bound" if self.bound_rate else ""
        overall = " overall" if settled else ""  # once done, the whole run's average
        speed.append(Text("rate —" if rate is None else f"rate {rate:.1f}/s{overall}{bound}"))
        left = s.total - s.done - s.pending
        if left and not s.stopping:
            eta = duration(left / rate) if rate else "—"
            speed.append(Text(f"ETA {eta}"))
        if s.outage_since is not None:
            down = duration(now - s.outage_since)
            speed.append(Text(f"OUTAGE: {literal(s.outage)}, probing ({down})", "bold red"))
        elif not settled and (waiting := waiting_text(s, now)) is not None:
            speed.append(Text(waiting, "yellow"))
        storm = None if settled else storm_text(s, now)
        if s.stopping:
            speed.append(Text(f"stopping: {literal(s.stopping)}", "yellow"))
        elif storm is not None:
            speed.append(Text(storm, "yellow"))
        elif (
            fall is not None
            and not settled
            and s.outage_since is None
            and t_now - fall.since >= FALL_LASTING
            # (A rate back over the fall's line: it is ending.)
            and (rate is None or rate < FALL_SHARE * fall.best)
        ):
            # Its cause as the summary will give it.
            cause = fall_cause(s.outages, s.timeouts, s.stood_still)
            speed.append(Text(fall_text(fall, rate, why=cause), "yellow"))

        counts = [
            Text(f"succeeded {s.succeeded}", "green" if s.succeeded else ""),
            Text(f"failed {s.failed}", "red" if s.failed else ""),
            Text(f"missing {s.missing}", "red" if s.missing else ""),
        ]
        if s.pending:
            counts.append(Text(f"pending {s.pending}", "yellow"))
        counts += [
            Text(f"calls {s.calls}"),
            Text(f"throttled {s.throttled_calls}", "yellow" if s.throttled_calls else ""),
            Text(f"error retries {s.retries}"),
            Text(f"timed out {s.timeouts}", "red" if s.timeouts else ""),
        ]
        if height < 3:  # compact: a count that stayed nil is left out to save a line
            counts = [c for c in counts if not c.plain.endswith(" 0") or "succeeded" in c.plain]

        chart_width = max(10, width - GUTTER - 1 - 7)
        chart = self._chart(arrays, t_now, chart_width, height)
        lines = [title]
        if height < 3:  # compact: state and speed share lines
            lines += _pack(state + speed, width)
        else:
            lines += _pack(state, width) + _pack(speed, width)
        for r, row in enumerate(chart.rows):
            scale = f"{chart.top:>{GUTTER - 1}.0f}┤" if r == 0 else " " * (GUTTER - 1) + "│"
            lines.append(Text.assemble((scale, "dim"), (row, CHART_STYLE)))
        lines.append(
            Text.assemble(
                (" " * (GUTTER - 1) + "└", "dim"),
                (chart.marks, "bold yellow"),
                (f"{duration(t_now):>7}", "dim"),
            )
        )
        lines += _pack(counts, width)
        if s.codes:
            top3 = sorted(s.codes.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            ranked = [Text(f"{literal(c)} {n}") for c, n in top3]
            ranked[0] = Text("errors: ") + ranked[0]
            lines += _pack(ranked, width)
        return lines

    def _chart(self, arrays: SeriesArrays, t_end: float, width: int, height: int) -> Chart:
        """The chart, drawn again only when its data or its shape changed (not so, once done)."""
        key = (len(arrays.t), arrays.t[-1] if arrays.t else None, t_end, width, height)
        cached = self._charts.get(id(arrays))
        if cached is None or cached[0] != key:
            cached = (key, window_chart(arrays, t_end, width, height))
            self._charts[id(arrays)] = cached
        return cached[1]

    def __enter__(self) -> LiveView:
        import signal

        self._live.__enter__()
        if hasattr(signal, "SIGTSTP") and threading.current_thread() is threading.main_thread():
            self._suspend_was = signal.signal(signal.SIGTSTP, self._suspend)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._suspend_was is not None:
            signal.signal(signal.SIGTSTP, self._suspend_was)
            self._suspend_was = None
        self._live.__exit__(None, None, None)


def _settled(s: Snapshot) -> bool:
    """Every intent has an outcome (pending included): nothing more will move."""
    return s.total > 0 and s.done + s.pending >= s.total


def progress_interval(
    interval: float | None = None,
    env: Mapping[str, str] = os.environ,
    console: Console | None = None,
) -> float:
    """Seconds between plain lines: the flag, else SWARM_PROGRESS_INTERVAL, else 2. A value
    of the variable that is no number of seconds is said on ``console``, and not used."""
    if interval is not None and interval > 0:
        return interval
    text = env.get(INTERVAL_ENV, "")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if 0 < value < math.inf:
        return value
    if text.strip() and console is not None and text not in _said_of:
        _said_of.add(text)  # once per command, however many views it shows
        console.print(
            f"warning: {INTERVAL_ENV}={text!r} is not a finite number of seconds above 0: "
            f"a line every {PLAIN_INTERVAL:g} s",
            markup=False,
            highlight=False,
        )
    return PLAIN_INTERVAL


_said_of: set[str] = set()  # values of INTERVAL_ENV warned of already


def total_line(snaps: Sequence[Snapshot], now: float) -> str:
    """All pairs on one line: a CI log of hundreds of pairs stays readable."""
    done = sum(s.done for s in snaps)
    total = sum(s.total for s in snaps)
    finished = sum(_settled(s) for s in snaps)
    starts = [s.started for s in snaps if s.started is not None]
    line = f"{done}/{total} done" + (f" ({100 * done // total}%)" if total else "")
    line += (
        f" · {len(snaps)} pairs, {finished} finished · {sum(s.in_flight for s in snaps)}"
        f" {IN_FLIGHT} · calls {sum(s.calls for s in snaps)}"
        f" · throttled {sum(s.throttled_calls for s in snaps)}"
        f" · failed {sum(s.failed for s in snaps)}"
    )
    missing = sum(s.missing for s in snaps)
    if missing:
        line += f" · missing {missing}"
    timeouts = sum(s.timeouts for s in snaps)
    if timeouts:
        line += f" · timed out {timeouts}"
    line += f" · {(now - min(starts)) if starts else 0.0:.1f}s"
    down = [s for s in snaps if s.outage_since is not None]
    if down:
        line += f" · OUTAGE in {len(down)} pair(s): {literal(down[0].outage)}, probing"
    # The longest wait first, of the pairs an outage does not say more of.
    waits = sorted(
        (s for s in snaps if s.outage_since is None and waiting_text(s, now) is not None),
        key=lambda s: s.waiting_since or 0.0,
    )
    if waits:
        line += f" · in {len(waits)} pair(s), e.g.: {waiting_text(waits[0], now)}"
    storms = [text for s in snaps if (text := storm_text(s, now))]
    if storms:
        line += f" · in {len(storms)} pair(s), e.g.: {storms[0]}"
    stopping = next((s.stopping for s in snaps if s.stopping), None)
    if stopping:
        line += f" · stopping: {literal(stopping)}"
    return line


class PlainLines:
    """For logs and CI, every ``interval`` seconds: one line for the whole run.

    A single pair's line says everything of it; with several, the line sums them, and
    ``detail`` (``--verbose``) adds a line per pair. The summary at the end has a row
    per pair either way.
    """

    def __init__(
        self,
        console: Console,
        rows: Rows,
        title: str,
        interval: float = PLAIN_INTERVAL,
        *,
        detail: bool = False,
    ) -> None:
        self.console = console
        self.rows = rows
        self.title = title
        self.interval = interval
        self.detail = detail
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="swarm-progress", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            # No markup, no highlighting: a stop reason may hold brackets, and a log line
            # must be the same bytes whatever the terminal.
            if len(self.rows) == 1:
                line = f"{literal(self.title)}: {status_line(self.rows[0][1], now)}"
                self.console.print(line, markup=False, highlight=False)
                continue
            snaps = [(label, stats.snapshot()) for label, stats in self.rows]
            line = f"{literal(self.title)}: {total_line([s for _, s in snaps], now)}"
            self.console.print(line, markup=False, highlight=False)
            for label, snap in snaps if self.detail else ():
                line = f"  {literal(label)}: {status_line(snap, now)}"
                self.console.print(line, markup=False, highlight=False)

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


def choose_progress(
    mode: ProgressMode,
    console: Console,
    rows: Rows,
    title: str,
    *,
    endpoint: str | None = None,
    badges: Sequence[str] = (),
    batch: int | None = None,
    bound_rate: float | None = None,
    already_done: int = 0,
    interval: float | None = None,
    detail: bool = False,
    env: Mapping[str, str] = os.environ,
) -> Progress:
    """Chosen once: the run loop does not care which."""
    if mode == "auto":
        mode = "live" if console.is_terminal and not console.is_dumb_terminal else "plain"
    if mode == "live":
        return LiveView(
            console,
            rows,
            title,
            endpoint=endpoint,
            badges=badges,
            batch=batch,
            bound_rate=bound_rate,
            already_done=already_done,
        )
    if mode == "plain":
        return PlainLines(
            console,
            rows,
            title,
            interval=progress_interval(interval, env, console),
            detail=detail,
        )
    return NoProgress()


def _wait_line(waited: Mapping[str, Any]) -> str:
    """A --wait's outcome, for the summary: "wait for stopped: 3 reached, 1 timed out",
    and the stretches its Describe calls met no answer."""
    return (
        f"wait for {waited.get('target')}: {waited.get('reached', 0)} reached"
        + "".join(
            f", {waited[k]} {k.replace('_', ' ')}"
            for k in ("timed_out", "wrong_state", "not_listed", "not_checked")
            if waited.get(k)
        )
        + (f" ({literal(waited['not_checked_why'])})" if waited.get("not_checked") else "")
        + _wait_trouble(waited)
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("s" if n != 1 else "")


def _wait_trouble(waited: Mapping[str, Any]) -> str:
    """What a wait's Describe calls met, for its line: "; the endpoint was down for a
    while (1 outage), 2 calls timed out" ("" if nothing)."""
    outages, timeouts = waited.get("outages") or 0, waited.get("timeouts") or 0
    parts = []
    if outages:
        parts.append(f"the endpoint was down for a while ({_count(outages, 'outage')})")
    if timeouts:
        parts.append(f"{_count(timeouts, 'call')} timed out")
    return f"; {', '.join(parts)}" if parts else ""


def follow_ups(report: Report, *, stopped: bool = True) -> list[tuple[str, bool, str]]:
    """What came after the run (its --wait, its rollback), one line each: what it is
    ("wait", "rollback", "rollback_wait", "rollback_stopped"), whether it went as it
    should, and the line. For the summary, the step summary and the HTML report alike;
    ``stopped`` False leaves out a rollback stopped before it began."""
    lines: list[tuple[str, bool, str]] = []
    waited = report.extra.get("wait")
    if waited:
        lines.append(("wait", not _unseen(waited), _wait_line(waited)))
    undone = report.extra.get("rollback")
    if undone:
        u = undone["counts"]
        lines.append(
            (
                "rollback",
                u["succeeded"] == undone["total"],
                f"rollback ({undone['action']}): {u['succeeded']} of {undone['total']} undone"
                + "".join(f", {u[k]} {k}" for k in ("failed", "missing", "pending") if u[k])
                + (f"; to finish it: {undone['finish']}" if undone.get("finish") else ""),
            )
        )
        if undone.get("wait"):
            back = undone["wait"]
            lines.append(("rollback_wait", not _unseen(back), f"rollback's {_wait_line(back)}"))
    before = report.extra.get("rollback_stopped") if stopped else None
    if before:
        lines.append(
            (
                "rollback_stopped",
                False,
                f"rollback stopped by {before['signal']} before anything was undone: "
                f"{literal(before['undo'])}",
            )
        )
    return lines


def _unseen(waited: Mapping[str, Any]) -> bool:
    return any(waited.get(k) for k in ("timed_out", "wrong_state", "not_listed", "not_checked"))


def _in_pairs(report: Report) -> str:
    """The pairs a stop came from, as " in 222222222222/us-east-1", where the run had
    several; "" where it had one."""
    return in_pairs(report, literal)


def render_summary(report: Report, console: Console) -> None:
    """The human summary of a run (its JSON twin is ``report.to_dict()``)."""

    # Messages, codes and paths come from outside: printed as text, never as markup.
    def say(text: Any, **kw: Any) -> None:
        console.print(text, markup=False, **kw)

    c = report.counts
    verb = "would succeed" if report.dry_run else "succeeded"
    unseen = report.unseen()
    target = report.extra.get("wait", {}).get("target", "there")
    head = Text.assemble(
        (f"{report.action}: ", "bold"),
        (
            f"{c['succeeded']} of {report.total} {verb}"
            + (f", {len(unseen)} not seen {target}" if unseen else ""),
            "green" if c["succeeded"] == report.total and not unseen else "yellow",
        ),
        f" in {report.elapsed_seconds:.1f}s",
    )
    say(head)
    unchanged = report.total_of("unchanged")
    if unchanged:
        # EC2 answered each with the state it was in already: nothing was changed (and a
        # rollback leaves them so).
        spec = ACTIONS.get(report.action)
        state = spec.target_state if spec is not None and spec.target_state else "there"
        say(
            f"  {unchanged} of those were {state} (or on their way) already: their calls "
            "changed nothing"
        )
    for row in report.pairs:
        w = row.window
        where = (
            f"  {literal(row.pair.label)}: {row.counts['succeeded']}/{row.total} · "
            if len(report.pairs) > 1
            else "  "
        )
        say(
            f"{where}calls {row.calls} · throttled {row.throttled_calls}"
            f" · error retries {row.retries} · allowed in flight: peak {w.peak:.0f}"
            f", final {w.final:.0f}, {w.decreases} decreases",
        )
        fall = RateWatch().update(row.series, row.total).fell()
        where = f"  {literal(row.pair.label)}: " if len(report.pairs) > 1 else "  "
        if row.throttled_for is not None:
            say(
                f"{where}every call throttled for the last {duration(row.throttled_for)}: "
                f"{STORM_WORDS}{batch_words(report)}",
                style="yellow",
            )
        elif fall is not None:
            cause = fall_cause(row.outages, row.timeouts, row.stood_still_seconds)
            say(
                f"{where}{fall_text(fall, why=cause)} (for {duration(fall.lasted)})", style="yellow"
            )
        elif (unanswered := unanswered_text(row.outages, row.timeouts)) is not None:
            say(f"{where}{unanswered}", style="yellow")
    for status in ("failed", "missing", "pending"):
        if c[status]:
            say(f"  {status}: {c[status]}", style="red")
    # With what --wait did not see arrive: not done either, as the ledger records them.
    problems = report.not_done()
    for item in problems[:20]:
        place = Pair(item.account, item.region).label if item.region else ""
        where = f"  {literal(place)}" if len(report.pairs) > 1 and place else ""
        say(
            f"    {literal(item.id)}{where}  {item.status}  {literal(item.code or '')}  "
            # EC2's NotFound names every ID of its call: the ledger holds it whole.
            f"{clip(own_part(item.message or '', item.id), 300)}"
        )
    if len(problems) > 20:
        if report.ledger_error:
            # The ledger failed: what it could not hold is printed above as its lines.
            where = " (--output json lists all; the ledger could not hold every one)"
        elif report.ledger:
            where = f" (see the ledger {literal(report.ledger)})"
        else:
            where = " (--output json lists all)"
        say(f"    … and {len(problems) - 20} more{where}")
    # (Not with --missing-ok: a run again of a deletion done already finds none, rightly.)
    if report.total and c["missing"] == report.total and "--missing-ok" not in report.retry_args:
        say(
            f"  none of the {report.total} exists where it was sent: another region or account? "
            "(--region, --profile, --accounts, or a CSV list with region and account columns)",
            style="yellow",
        )
    if report.crashed:
        say(f"  crashed: {literal(report.crashed.message)}", style="bold red")
    refused = refusal_text(report)
    if refused:
        say(f"  {refused}", style="bold red")
    unchecked = unchecked_text(report)
    if unchecked:
        say(f"  {unchecked}", style="yellow")
    if report.fatal:
        say(
            f"  stopped{_in_pairs(report)}: {literal(report.fatal.code)}: "
            f"{literal(report.fatal.message)}",
            style="bold red",
        )
    elif report.stopped:
        why = report.stopped
        say(
            f"  stopped early{_in_pairs(report)}: {literal(why.message or why.code)}",
            style="yellow",
        )
    if report.interrupted:
        say(
            f"  interrupted by {report.signal}: what was not done is recorded as pending",
            style="yellow",
        )
    timeouts = report.total_of("timeouts")
    if timeouts:
        say(f"  calls that timed out with no answer: {timeouts} (their IDs tried again)")
    # A rollback stopped before it began is said below, where the ledger's way back is.
    for what, ok, line in follow_ups(report, stopped=False):
        rolled = what == "rollback"
        say(f"  {line}", style=("green" if ok else "bold red") if rolled else None)
    if report.ledger_error:
        say(f"  ledger NOT fully written: {literal(report.ledger_error)}", style="bold red")
    if report.ledger:
        for text, style in ledger_lines(report):
            say(text, style=style)


def ledger_lines(report: Report) -> list[tuple[str, str | None]]:
    """What a summary says of a run's ledger, each line with its style: where it is, what
    failed for good, and the command that retries or finishes what is left (the terminal's
    summary and the job's page say the same)."""
    lines: list[tuple[str, str | None]] = []

    def say(text: str, style: str | None = None) -> None:
        lines.append((text, style))

    if not report.ledger:
        return lines
    c = report.counts
    undone = report.extra.get("rollback")
    # A ledger the disk refused from its first line is removed again: not named as kept.
    kept = os.path.exists(report.ledger)
    moved = bool(report.ledger_error and MOVED in report.ledger_error)
    if moved:
        # What it wrote is where the file went; what it could not is printed above.
        where = (
            " (moved or replaced during the run: what it recorded is in the moved file, "
            "the outcomes it could not write are printed above)"
        )
    else:
        where = "" if kept else " (none written)"
    say(f"  ledger: {literal(report.ledger)}{where}")
    codes = report.failed_for_good()
    stuck = sum(codes.values())
    if stuck:
        which = ", ".join(f"{n} {literal(code or '')}" for code, n in sorted(codes.items()))
        say(f"  failed permanently: {stuck} ({which}); a retry fails again")
    if undone:
        return lines  # the run was rolled back: what it left is not to be retried
    stopped = report.extra.get("rollback_stopped")
    if stopped:
        # Stopped before its undo began: the way back is the undo, not the rest of the run.
        say(
            f"  rollback stopped by {stopped['signal']} before anything was undone: "
            f"{literal(stopped['undo'])}",
            style="bold red",
        )
        return lines
    finish = report.extra.get("finish")
    if finish:
        # An undo (swarm rollback) cut short, refused in part or not seen through by
        # its wait: the undo again, of its runs. A retry of what the ledger holds of
        # its action would take in other runs' intents too (a start the ledger left
        # pending, undone or not).
        say(f"  to finish it: {literal(finish)}")
        return lines
    if moved:
        # The path names no ledger of this run now (or another run's): no command on it.
        say(
            "  to retry the rest: merge the moved file with the lines printed above "
            "(swarm ledger merge), then swarm ledger failed and --resume on the merged "
            "ledger",
            style="yellow",
        )
    elif not report.intents_recorded:
        # `ledger failed` lists only the intents on disk; the rest would be lost.
        say(
            "  nothing was sent, and this run's intents are not all in the ledger (what "
            "earlier runs recorded there stands): once it can be written, run the same "
            "command again",
            style="bold red",
        )
    else:
        # The same ledger, so that the record stays in one file; --yes, for the IDs
        # are those this run was already allowed to act on.
        # Through a file and &&: a list that cannot be made (a ledger of several
        # actions, a typo) stops the retry, where <(...) would send nothing, exit 0.
        given = "".join(f" {shell_quote(arg)}" for arg in report.retry_args)
        # The list beside the ledger, named after it: no other file is emptied by the
        # redirection (a ledger named left.txt was), and a path starting with - is no
        # option.
        path = report.ledger if not report.ledger.startswith("-") else f"./{report.ledger}"
        ledger = shell_quote(path)
        left = shell_quote(f"{path}.left")
        # A run over several regions or accounts keeps each ID in its place, even when
        # what is left lies in one region (bare IDs would go to this command's region).
        form = "--format csv " if len(report.pairs) > 1 else ""
        again = (
            f"{form}{ledger} >{left} && swarm {command_of(report.action)}{given} --yes "
            f"--ledger {ledger} --ids {left} --resume"
        )
        moving = sum(1 for p in report.problems if p.code == IN_TRANSITION_CODE)
        if c["failed"] + c["pending"] > stuck + moving:
            # A ledger that could not be written (a full disk, say) may take no list
            # beside it either, nor the retry's records: first that, or another disk.
            when = (
                "once the ledger can be written again (see why above; or copy it to a disk "
                "that takes it and use that path in the command below), "
                if report.ledger_error
                else ""
            )
            say(
                f"  {when}retry the rest: swarm ledger failed --retryable --action "
                f"{report.action} {again}"
            )
        waited = report.extra.get("wait") or {}
        if (waited.get("timed_out") or waited.get("not_checked")) and (
            report.action in FINAL_SUCCESS
        ):
            # Accepted, and EC2 does not take a terminate or a deletion back: the ledger
            # counts them done, so a list from `ledger failed` would hold none of them.
            again_words = (
                # Its --ids list or --filter, its --ledger, where it acted: all of it.
                "; the same command with --resume looks them up and waits for them again"
                + (" (once their state can be read)" if waited.get("not_checked") else "")
                if report.action in ACTIONS
                else ""
            )
            say(
                f"  not seen {waited.get('target')}: EC2 accepted their calls and does "
                "not take them back, so the ledger counts them done and swarm ledger "
                f"failed does not list them{again_words}"
            )
        elif waited.get("timed_out") or waited.get("not_checked"):
            # Accepted, but not seen there: a resume looks them up, and waits again.
            say(
                f"  not seen {waited.get('target')}: swarm ledger failed --retryable "
                f"--action {report.action} {again}"
                + ("" if "--wait" in report.retry_args else " --wait")
            )
        passing = REFUSED_ON_THE_WAY.get(report.action)
        if passing and moving:
            # Refused while on their way (a start right after a stop): not for good.
            target = PASSING_TO[passing]
            say(
                f"  {moving} refused while {passing}: once they are {target}, swarm "
                f"ledger failed --retryable --action {report.action} {again}"
            )
    return lines
