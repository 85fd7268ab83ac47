"""The shareable HTML report: one file that loads nothing, draws each pair's window and
rate, lists what did not succeed with every text escaped, and renders in a real browser."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import artifact_path, chromium, visit

from swarm_cli import html_report
from swarm_cli.html_report import MAX_PROBLEM_ROWS, rates, render_html, write_html
from swarm_cli.report import PairReport, Problem, Reason, Report, Sample, WindowReport

POINTS = 300
STEP = 0.05  # seconds between samples: a 15 s run
# Sample indices at which one more call was throttled; 60-61 and 220-222 are bursts,
# still one mark per sample at which the counter rose.
THROTTLED_AT = (60, 61, 140, 220, 221, 222, 280)
HOSTILE = '<script>alert("x")</script>'


def series(throttled_at: tuple[int, ...] = THROTTLED_AT) -> list[Sample]:
    """A sawtooth window: doubling, then one more per sample, halved at each throttle."""
    out, cwnd, done, throttled = [], 1.0, 0, 0
    for i in range(POINTS):
        if i in throttled_at:
            throttled += 1
            cwnd = max(1.0, cwnd / 2)
        else:
            cwnd = min(cwnd * 2, 64.0) if i < 8 else cwnd + 0.25
        in_flight = int(cwnd * 0.8)
        done += in_flight // 2
        out.append(Sample(round(i * STEP, 4), cwnd, in_flight, done, throttled))
    return out


def pair(region: str, points: list[Sample]) -> PairReport:
    done = points[-1].done if points else 0
    return PairReport(
        region=region,
        account="111122223333",
        total=done + 2,
        counts={"succeeded": done, "failed": 1, "missing": 1, "pending": 0},
        calls=400,
        throttled_calls=points[-1].throttled if points else 0,
        retries=5,
        timeouts=1,
        peak_in_flight=max((s.in_flight for s in points), default=0),
        elapsed_seconds=points[-1].t if points else 0.0,
        window=WindowReport(
            final=points[-1].cwnd if points else 0.0,
            peak=max((s.cwnd for s in points), default=0.0),
            decreases=points[-1].throttled if points else 0,
        ),
        errors={"InvalidInstanceID.NotFound": 1, "UnauthorizedOperation": 1},
        series=points,
    )


def problems(n: int = 4) -> list[Problem]:
    first = [
        Problem("i-0aaa", "failed", "UnauthorizedOperation", HOSTILE, "us-east-1", "111122223333"),
        Problem('i-0bbb"><b>', "missing", "InvalidInstanceID.NotFound", "gone & forgotten"),
        Problem("i-0ccc", "failed", "Client.<img src=x>", None, "eu-west-1", "111122223333"),
        Problem("i-0ddd", "pending", None, "not sent: interrupted", "eu-west-1"),
    ]
    extra = [Problem(f"i-{k:017x}", "failed", "Throttling", "gave up") for k in range(n - 4)]
    return (first + extra)[:n]


def make_report(**changes: object) -> Report:
    report = Report(
        run="20250101T000000Z-abcd",
        action="terminate",
        pairs=[pair("us-east-1", series()), pair("eu-west-1", series((100, 101)))],
        problems=problems(),
        ledger="/var/lib/swarm/terminate.jsonl",
        elapsed_seconds=15.2,
        exit_code=1,
    )
    for name, value in changes.items():
        setattr(report, name, value)
    return report


class Node:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs = tag, attrs
        self.children: list[Node] = []
        self.parts: list[Node | str] = []  # children and text, in document order

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def select(self, tag: str, cls: str | None = None) -> list[Node]:
        return [n for n in self.walk() if n.tag == tag and (cls is None or cls in n.classes)]

    @property
    def text(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))

    def all_text(self) -> str:
        return "".join(p if isinstance(p, str) else p.all_text() for p in self.parts)

    def add(self, child: Node) -> None:
        self.children.append(child)
        self.parts.append(child)


class Tree(HTMLParser):
    """Just enough of a DOM to find elements by tag and class, as the standard parser sees them."""

    VOID = frozenset({"meta", "link", "br", "img", "hr", "input", "source", "wbr"})

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].add(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].add(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(page: str) -> Node:
    return Tree(page).root


def test_page_loads_nothing_from_anywhere() -> None:
    page = render_html(make_report())
    root = parse(page)
    linked = [
        (n.tag, name, value)
        for n in root.walk()
        for name, value in n.attrs.items()
        if name in ("src", "href", "xlink:href", "action", "poster", "data", "srcset")
    ]
    assert all(value.startswith("#") for _, _, value in linked), linked
    assert "http:" not in page and "https:" not in page and "//" not in page.replace("://", "")
    assert "@import" not in page and "url(" not in page
    assert not root.select("script") and not root.select("link")
    (policy,) = [m for m in root.select("meta") if m.attrs.get("http-equiv")]
    assert "default-src 'none'" in policy.attrs["content"]


def test_each_pair_has_a_window_chart_and_a_rate_chart() -> None:
    report = make_report()
    root = parse(render_html(report))
    sections = root.select("section", "pair")
    assert [s.attrs["data-pair"] for s in sections] == [p.pair.label for p in report.pairs]
    for section, row in zip(sections, report.pairs, strict=True):
        (window,) = section.select("svg", "window")
        (rate,) = section.select("svg", "rate")
        for line in ("cwnd", "inflight"):
            (poly,) = window.select("polyline", line)
            assert len(poly.attrs["points"].split()) == POINTS
        (poly,) = rate.select("polyline", "rate")
        assert len(poly.attrs["points"].split()) == len(row.series)
        assert rate.select("line", "mean")


def test_a_throttle_mark_at_each_rise_of_the_counter() -> None:
    root = parse(render_html(make_report()))
    first, second = (s.select("g", "throttles")[0] for s in root.select("svg", "window"))
    assert len(first.select("circle")) == len(THROTTLED_AT)
    assert len(second.select("circle")) == 2
    assert "throttled at 3.00 s (+1)" in first.select("circle")[0].all_text()


def test_axes_have_round_ticks_in_seconds_and_calls() -> None:
    window = parse(render_html(make_report())).select("svg", "window")[0]
    labels = [t.text for t in window.select("g", "ticks")[0].select("text")]
    # Calls first: the window peaks at 77, on 0-80 in steps of 20; then 15 s on 0-16 by 2.
    assert labels[-9:] == ["0", "2", "4", "6", "8", "10", "12", "14", "16"]
    assert labels[0] == "0" and labels[1] == "20"
    titles = {t.text for t in window.select("text") if t.classes & {"xlabel", "ylabel"}}
    assert titles == {"time (s)", "calls"}


def test_short_runs_get_decimal_ticks() -> None:
    short = [Sample(i * 0.01, 2.0, 1, i, 0) for i in range(90)]  # 0.89 s
    root = parse(render_html(make_report(pairs=[pair("us-east-1", short)])))
    window = root.select("svg", "window")[0]
    labels = [t.text for t in window.select("g", "ticks")[0].select("text")]
    assert labels[-6:] == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]


def test_rate_is_done_per_second_over_the_window_before_each_point() -> None:
    steady = [Sample(i * 0.1, 8.0, 8, 10 * i, 0) for i in range(40)]  # 100 per second
    points = rates(steady, 1.0)
    assert points[0] == (0.0, 0.0)
    # The first second counts from the start, over the whole window: a ramp, not a spike.
    assert points[5][1] == pytest.approx(50.0)
    assert all(r == pytest.approx(100.0) for _, r in points[10:])


def test_problem_table_lists_each_failure_with_its_text_escaped() -> None:
    report = make_report()
    page = render_html(report)
    root = parse(page)
    (table,) = root.select("table", "problems")
    rows = [
        [td.all_text() for td in tr.select("td")] for tr in table.select("tbody")[0].select("tr")
    ]
    assert rows == [
        ["i-0aaa", "us-east-1", "111122223333", "failed", "UnauthorizedOperation", HOSTILE],
        ['i-0bbb"><b>', "", "", "missing", "InvalidInstanceID.NotFound", "gone & forgotten"],
        ["i-0ccc", "eu-west-1", "111122223333", "failed", "Client.<img src=x>", ""],
        ["i-0ddd", "eu-west-1", "", "pending", "", "not sent: interrupted"],
    ]
    assert HOSTILE not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;" in page


def test_problem_table_stops_at_the_cap_and_points_to_the_ledger() -> None:
    report = make_report(problems=problems(MAX_PROBLEM_ROWS + 7))
    root = parse(render_html(report))
    (table,) = root.select("table", "problems")
    assert len(table.select("tbody")[0].select("tr")) == MAX_PROBLEM_ROWS
    (more,) = root.select("p", "more")
    assert "7 more, see the ledger /var/lib/swarm/terminate.jsonl" in more.all_text()
    # A ledger that failed does not hold them all: not sent there.
    failed = make_report(problems=problems(MAX_PROBLEM_ROWS + 7), ledger_error="disk full")
    (more,) = parse(render_html(failed)).select("p", "more")
    assert "7 more, the ledger could not hold them all" in more.all_text()


def test_a_message_naming_a_thousand_ids_is_cut_in_the_page() -> None:
    from swarm_cli.html_report import MESSAGE_CHARS

    named = "The instance IDs '" + ", ".join(f"i-{n:017x}" for n in range(1000)) + "' do not exist"
    report = make_report(
        problems=[
            Problem(f"i-{n:08x}", "missing", "InvalidInstanceID.NotFound", named)
            for n in range(1000)
        ]
    )
    page = render_html(report)
    assert len(page) < 2_000_000  # 21 MB whole
    (table,) = parse(page).select("table", "problems")
    first = table.select("tbody")[0].select("tr")[0].select("td")[-1].all_text()
    assert len(first) == MESSAGE_CHARS and first.endswith("…")


def test_summary_says_what_ran_and_why_it_stopped() -> None:
    report = make_report(signal="SIGINT", endpoint="<http://127.0.0.1:5000>", dry_run=True)
    report.pairs[0].fatal = Reason("AuthFailure", "AWS was not able to <validate>")
    root = parse(render_html(report))
    (summary,) = root.select("dl", "summary")
    terms = [n.all_text() for n in summary.select("dt")]
    values = dict(zip(terms, (n.all_text() for n in summary.select("dd")), strict=True))
    assert values["action"] == "terminate" and values["dry run"] == "yes"
    assert (
        values["calls"] == "800" and values["error retries"] == "10" and values["time-outs"] == "2"
    )
    assert values["throttled"] == "9 (1.1% of calls)"
    assert values["endpoint"] == "<http://127.0.0.1:5000>"  # shown as text, never a link
    assert values["exit code"] == "1"
    notes = [li.all_text() for li in root.select("ul", "notes")[0].select("li")]
    assert notes[0] == "stopped: AuthFailure: AWS was not able to <validate>"
    assert notes[1].startswith("interrupted by SIGINT")
    assert root.select("h1")[0].all_text() == "swarm terminate (dry run)"
    first, second = root.select("table", "pairs")[0].select("tbody")[0].select("tr")
    assert first.select("td")[0].all_text() == "111122223333/us-east-1 stopped"
    assert second.select("td")[0].all_text() == "111122223333/eu-west-1"
    (pair_notes,) = root.select("section", "pair")[0].select("ul", "notes")
    assert [li.all_text() for li in pair_notes.select("li")] == [
        "stopped: AuthFailure: AWS was not able to <validate>",
        "errors: InvalidInstanceID.NotFound \u00d71, UnauthorizedOperation \u00d71",
    ]


def test_pair_without_points_says_so_instead_of_a_chart() -> None:
    report = make_report(pairs=[pair("us-east-1", [])], problems=[])
    root = parse(render_html(report, title="nothing to see"))
    assert not root.select("svg")
    assert root.select("p", "nochart")
    assert root.select("p", "none")
    assert root.select("title")[0].all_text() == "nothing to see"


def test_write_html_replaces_the_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_html(make_report(), str(target))
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)  # the reader's access stays as set

    def broken(report: Report, *, title: str | None = None) -> str:
        raise RuntimeError("render failed")

    monkeypatch.setattr(html_report, "render_html", broken)
    with pytest.raises(RuntimeError):
        write_html(make_report(), str(target))
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temp file left


@pytest.mark.slow
def test_chromium_renders_the_charts_without_errors(tmp_path: Path) -> None:
    report = make_report()
    path = tmp_path / "report.html"
    write_html(report, str(path))
    with chromium() as browser, visit(browser, path) as seen:
        page = seen.page
        assert page.locator("svg.chart.window").count() == len(report.pairs)
        assert page.locator("svg.chart.rate").count() == len(report.pairs)
        assert page.locator("svg.window g.throttles circle").count() == len(THROTTLED_AT) + 2
        assert page.locator("table.problems tbody tr").count() == len(report.problems)
        assert page.locator("script").count() == 0  # the hostile text stayed text
        assert HOSTILE in page.locator("table.problems").inner_text()
        # Laid out, not just present: the line spans the plot, across most of its width.
        for line in ("polyline.cwnd", "polyline.inflight", "polyline.rate"):
            box = page.locator(line).first.bounding_box()
            assert box is not None and box.get("width", 0) > 500, (line, box)
        shot = artifact_path("report.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.requests == [path.resolve().as_uri()] and seen.failed == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 5_000


@pytest.mark.slow
def test_chromium_blocks_anything_the_page_would_fetch(tmp_path: Path) -> None:
    # The policy is what keeps a shared report from calling out: prove the browser enforces it.
    page = render_html(make_report()).replace(
        "</body>", '<img src="https://example.invalid/pixel.png"></body>'
    )
    path = tmp_path / "tampered.html"
    path.write_text(page)
    with chromium() as browser, visit(browser, path) as seen:
        pass
    assert any(re.search(r"Content Security Policy", e) for e in seen.console_errors)
    # Chromium's own word for it varies by version (net::ERR_BLOCKED_BY_CSP, csp).
    assert [(url, bool(re.search("csp", why, re.I))) for url, why in seen.failed] == [
        ("https://example.invalid/pixel.png", True)
    ]


def test_halving_a_long_series_keeps_each_dropped_points_peak_in_flight() -> None:
    from swarm_cli.stats import _halved

    points = [Sample(float(t), 1.0, flight, t, 0) for t, flight in enumerate([1, 9, 2, 3, 4])]
    halved = _halved(points)
    assert [s.t for s in halved] == [0.0, 2.0, 4.0]
    assert [s.in_flight for s in halved] == [1, 9, 4]
    assert [s.done for s in halved] == [0, 2, 4]


def test_the_mean_rate_leaves_out_what_was_settled_unsent_at_the_start() -> None:
    """300 IDs a rail recorded before the first call, then 20 done over 4 s: 5 per second."""
    from swarm_cli.html_report import _rate_figure

    points = [Sample(0.0, 1.0, 0, 300, 0), Sample(2.0, 2.0, 2, 310, 0), Sample(4.0, 2.0, 0, 320, 0)]
    assert "mean 5.0/s" in _rate_figure(points, 4.0, "instances")


def test_the_rollback_after_the_run_is_a_note_in_words() -> None:
    report = make_report()
    report.extra["rollback"] = {
        "action": "start",
        "total": 2,
        "counts": {"succeeded": 2, "failed": 0, "missing": 0, "pending": 0},
    }
    report.extra["sandbox"] = {"terminated": 5}
    root = parse(render_html(report))
    notes = [li.all_text() for li in root.select("ul", "notes")[0].select("li")]
    assert "rollback (start): 2 of 2 undone" in notes
    (summary,) = root.select("dl", "summary")
    terms = [n.all_text() for n in summary.select("dt")]
    assert "rollback" not in terms and "sandbox" in terms  # no raw JSON of what is said


def test_an_endpoints_megabyte_error_and_long_code_are_cut_in_the_page() -> None:
    """A fatal error's message is whatever the endpoint said (a megabyte, say), and a
    code too: the page quotes a part of each, in the notes, the pair's notes and the
    problem table."""
    from swarm_cli.html_report import CODE_CHARS, NOTE_CHARS

    code, message = "Code" + "X" * 600, "m" * 1_200_000
    report = make_report(problems=[Problem("i-1", "failed", code, "short")])
    report.pairs[0].fatal = Reason(code, message)  # the run's too
    report.pairs[0].errors = {code: 3}
    page = render_html(report)
    assert len(page) < 100_000
    root = parse(page)
    note = root.select("ul", "notes")[0].select("li")[0].all_text()
    shown_code, _, shown_message = note.removeprefix("stopped: ").partition(": ")
    assert len(shown_code) == CODE_CHARS and len(shown_message) == NOTE_CHARS
    (table,) = root.select("table", "problems")
    cells = table.select("tbody")[0].select("tr")[0].select("td")
    assert len(cells[4].all_text()) == CODE_CHARS and cells[4].all_text().endswith("…")
    assert "code { overflow-wrap: anywhere; }" in page


def test_a_page_names_what_the_run_acted_on() -> None:
    """A snapshot run's page speaks of snapshots, a tag run's of IDs: it said "instances"
    for every run. The rate counts every answer, failed ones too, and says so."""
    for action, things in (
        ("terminate", "Instances"),
        ("delete-snapshot", "Snapshots"),
        ("release-address", "Addresses"),
        ("create-tags", "IDs"),
    ):
        page = render_html(make_report(action=action))
        assert f"<h2>{things} not done (4)</h2>" in page, action
        assert f"{things.lower() if things != 'IDs' else things} answered per second" in page
        other = {"Instances", "Snapshots", "Addresses"} - {things}
        assert not any(f"<h2>{o} not" in page for o in other)


def test_the_terminal_summary_says_what_the_wait_did_not_see_arrive() -> None:
    from rich.console import Console

    from swarm_cli.display import render_summary

    unseen = {"id": "i-0eee", "status": "pending", "code": "WaitTimeout", "message": "m"}
    report = make_report(action="stop", extra={"wait": {"target": "stopped", "problems": [unseen]}})
    console = Console(record=True, width=200)
    render_summary(report, console)
    text = console.export_text()
    assert "not seen stopped" in text.splitlines()[0]
    assert "i-0eee  pending  WaitTimeout" in text  # listed with what else is not done
    assert [p.id for p in report.not_done()][-1] == "i-0eee"
