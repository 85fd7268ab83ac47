"""Plain SVG charts of the window and the calls in flight over time: no dependencies.

One file per scenario, one panel per contender, a shared time axis. A panel holds
step lines (cwnd, in-flight as the client saw it, in-flight as the sandbox saw it)
and red ticks along its bottom edge for throttles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

WIDTH = 960
PANEL_HEIGHT = 150
LEFT, RIGHT, TOP, GAP = 56, 16, 34, 46
MAX_POINTS = 1200  # per line: longer ones are thinned (the peak of each slice kept)
MAX_TICKS = 2000


@dataclass
class Line:
    label: str
    colour: str
    points: list[tuple[float, float]]
    dash: str = ""


@dataclass
class Panel:
    title: str
    lines: list[Line] = field(default_factory=list)
    throttles: list[float] = field(default_factory=list)
    note: str = ""


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """JSON lines of a trace; a missing file or damaged lines give what could be read."""
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and isinstance(event.get("t"), int | float):
                    out.append(event)
    except OSError:
        return []
    return out


def series(
    events: Iterable[dict[str, Any]], key: str, shift: float = 0.0
) -> list[tuple[float, float]]:
    """(t, value) of every event that carries ``key``, on the parent's clock."""
    return [
        (float(e["t"]) + shift, float(e[key]))
        for e in events
        if isinstance(e.get(key), int | float)
    ]


def thin(
    points: Sequence[tuple[float, float]], most: int = MAX_POINTS
) -> list[tuple[float, float]]:
    if len(points) <= most:
        return list(points)
    step = len(points) / most
    out = []
    for k in range(most):
        chunk = points[int(k * step) : int((k + 1) * step)] or [points[-1]]
        out.append((chunk[0][0], max(v for _, v in chunk)))
    return out


def _ticks(top: float) -> list[float]:
    if top <= 0:
        return [0.0]
    raw = top / 4
    magnitude = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = max(1.0, float(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)))
    return [k * step for k in range(int(top // step) + 1)]


def render(title: str, panels: Sequence[Panel]) -> str:
    x_end = max(
        [1.0]
        + [p[0] for panel in panels for line in panel.lines for p in line.points]
        + [t for panel in panels for t in panel.throttles]
    )
    plot_w = WIDTH - LEFT - RIGHT
    height = TOP + len(panels) * (PANEL_HEIGHT + GAP) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    x_ticks = _ticks(x_end)
    for n, panel in enumerate(panels):
        y0 = TOP + n * (PANEL_HEIGHT + GAP) + 18
        y_top = max([1.0] + [v for line in panel.lines for _, v in line.points]) * 1.08

        def sx(t: float) -> float:
            return LEFT + plot_w * t / x_end

        def sy(v: float, y0: float = y0, y_top: float = y_top) -> float:
            return y0 + PANEL_HEIGHT - PANEL_HEIGHT * v / y_top

        parts.append(
            f'<text x="{LEFT}" y="{y0 - 5}" font-weight="bold">{escape(panel.title)}</text>'
        )
        legend_x = LEFT + 8 + 7 * len(panel.title)
        for line in panel.lines:
            parts.append(
                f'<line x1="{legend_x}" y1="{y0 - 9}" x2="{legend_x + 16}" y2="{y0 - 9}" '
                f'stroke="{line.colour}" stroke-width="2" stroke-dasharray="{line.dash}"/>'
                f'<text x="{legend_x + 20}" y="{y0 - 5}">{escape(line.label)}</text>'
            )
            legend_x += 30 + 6 * len(line.label)
        if panel.throttles:
            parts.append(
                f'<line x1="{legend_x}" y1="{y0 - 13}" x2="{legend_x}" y2="{y0 - 5}" '
                f'stroke="#d62728"/><text x="{legend_x + 5}" y="{y0 - 5}">'
                f"throttles ({len(panel.throttles)})</text>"
            )
            legend_x += 90
        if panel.note:
            parts.append(
                f'<text x="{legend_x + 6}" y="{y0 - 5}" fill="#666">{escape(panel.note)}</text>'
            )
        parts.append(
            f'<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{PANEL_HEIGHT}" '
            'fill="none" stroke="#999"/>'
        )
        for v in _ticks(y_top):
            y = sy(v)
            parts.append(
                f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#999"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>'
            )
        for t in x_ticks:
            x = sx(t)
            parts.append(
                f'<line x1="{x:.1f}" y1="{y0 + PANEL_HEIGHT}" x2="{x:.1f}" '
                f'y2="{y0 + PANEL_HEIGHT + 4}" stroke="#999"/>'
                f'<text x="{x:.1f}" y="{y0 + PANEL_HEIGHT + 15}" text-anchor="middle">{t:g}s</text>'
            )
        for line in panel.lines:
            if not line.points:
                continue
            steps: list[str] = []
            previous: float | None = None
            for t, v in thin(sorted(line.points)):
                if previous is not None:
                    steps.append(f"{sx(t):.1f},{sy(previous):.1f}")
                steps.append(f"{sx(t):.1f},{sy(v):.1f}")
                previous = v
            parts.append(
                f'<polyline fill="none" stroke="{line.colour}" stroke-width="1.4" '
                f'stroke-dasharray="{line.dash}" points="{" ".join(steps)}"/>'
            )
        marks = panel.throttles
        if len(marks) > MAX_TICKS:
            marks = marks[:: len(marks) // MAX_TICKS + 1]
        bottom = y0 + PANEL_HEIGHT
        parts.extend(
            f'<line x1="{sx(t):.1f}" y1="{bottom - 7}" x2="{sx(t):.1f}" y2="{bottom}" '
            'stroke="#d62728" stroke-opacity="0.6"/>'
            for t in marks
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write(path: Path, title: str, panels: Sequence[Panel]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(title, panels), encoding="utf-8")
