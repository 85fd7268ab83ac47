"""The plan shown: a rich table for people, JSON for ``--output json``, the ID file.

What ``plan.py`` computes (predictions, permission, the time estimate) is
rendered here, so that computing a plan needs no terminal library.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import stat
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .actions import Bucket
from .errors import EXIT_LEDGER, error_for
from .plan import PROTECTION_ATTRIBUTES, Estimate, Plan, Prediction, Row
from .text import literal, one_or_more, text

# Rows a person is shown; the JSON and the ID file hold them all.
SAMPLE_ROWS = 50
# Characters of a Name tag a row shows (EC2 allows 256): past it, cut with "…" (the JSON
# holds it whole), so one long name does not make every line of a log that wide.
NAME_CHARS = 64


_STYLES = {
    Prediction.WOULD_ACT: "green",
    Prediction.ALREADY: "cyan",
    Prediction.IGNORED: "cyan",
    Prediction.DOES_NOT_EXIST: "yellow",
    Prediction.WRONG_STATE: "red",
    Prediction.PROTECTED: "red",
    Prediction.NOT_PERMITTED: "bold red",
    Prediction.UNKNOWN: "magenta",
    Prediction.NOT_SELECTED: "yellow",
}


# Predictions a person approving the run must see: those that would fail or are unknown.
_ATTENTION = frozenset(_STYLES) - {Prediction.WOULD_ACT, Prediction.ALREADY}


def estimate_text(est: Estimate) -> str:
    """One line: the bound and the expected time, and what sets them."""
    head = f"at EC2's default limits for {est.api}"
    longest = est.longest
    if longest is None or longest.ids == 0:
        return f"{head}: nothing to send"
    if est.bound_seconds == 0:
        return (
            f"{head}: {longest.calls} call(s) fit in the burst of {est.calls_bucket.burst:g}; "
            "the limits impose no wait, round trips alone set the time"
        )
    by = "calls" if longest.by_calls >= longest.by_instances else "instances"
    where = f", longest pair {longest.pair.label}" if len(est.pairs) > 1 else ""
    return (
        f"{head}: bound {est.bound_seconds:.1f} s, expected about {est.expected_seconds:.1f} s "
        f"({longest.calls} call(s) of up to {est.batch_size} ID(s), set by the {by} bucket{where})"
    )


def _calls_text(calls: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {api}" for api, n in calls.items()) or "no"


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _print_whole(table: Table, console: Console) -> None:
    """A table on a terminal fits its width; in a log or a file (where rich assumes 80
    columns), it is printed as wide as its cells, so no cell is cut or wrapped."""
    width = console.measure(table, options=console.options.update_width(10_000)).maximum
    if console.is_terminal or width <= console.width:
        console.print(table)
        return
    wide = Console(file=console.file, width=width, highlight=False, color_system=None)
    wide.print(table)


def render_plan(plan: Plan, estimate: Estimate, console: Console) -> None:
    """The plan for people: a sample of rows, the counts, what it cost, the time it will take."""
    several = len(plan.pairs) > 1
    title = f"plan: {plan.action.name} {plan.total} {one_or_more(plan.action.resource)}"
    table = Table(title=title, title_justify="left")
    if several:
        table.add_column("pair")
    rows = plan.rows
    if plan.total > SAMPLE_ROWS:
        # What an approver must not miss first: the rows that would fail or are unknown.
        rows = sorted(rows, key=lambda r: r.prediction not in _ATTENTION)
    shown = rows[:SAMPLE_ROWS]
    instances = plan.action.resource == "instance"
    # A snapshot has no type; an instance is launched, a snapshot or a volume created.
    typed = instances or any(r.info and r.info.type for r in shown)
    when = "launched" if instances else "created"
    for name in ("ID", "Name", *(("type",) if typed else ()), "state", when, "predicted outcome"):
        table.add_column(name, no_wrap=name == "ID")
    for row in shown:
        info = row.info
        launched = info.launch_time.strftime("%Y-%m-%d %H:%M") if info and info.launch_time else ""
        # Text cells: a Name tag is anyone's text, never markup (see swarm_cli.text).
        cells = [
            text(row.id),
            text(_cut((info.name or "") if info else "")),
            *((text(info.type if info else ""),) if typed else ()),
            text(info.state if info else ""),
            Text(launched),
            Text.assemble(
                (row.prediction.value, _STYLES[row.prediction]),
                # Why it would fail, or could not be read: an AMI that uses the snapshot.
                (f": {literal(row.reason)}" if row.reason and row.prediction in _ATTENTION else ""),
            ),
        ]
        table.add_row(*([text(row.pair.label)] if several else []), *cells)
    _print_whole(table, console)
    if plan.total > SAMPLE_ROWS:
        hidden = sum(r.prediction in _ATTENTION for r in rows[SAMPLE_ROWS:])
        console.print(
            f"… and {plan.total - SAMPLE_ROWS} more rows"
            + (f", {hidden} of them that would fail or could not be read" if hidden else "")
            + " (rows that would fail or could not be read come first; --output json lists "
            "every row)",
            highlight=False,
        )
    counts = " · ".join(f"{n} {name}" for name, n in plan.counts.items() if n)
    missing = plan.counts[Prediction.DOES_NOT_EXIST.value] if plan.missing_ok else 0
    done = f" (--missing-ok: the {missing} that do not exist count done)" if missing else ""
    console.print(f"predicted: {counts or 'nothing'}; {len(plan.would_fail)} would fail{done}")
    if plan.rail_unseen:
        console.print(
            Text.assemble(
                ("refused:", "bold red"),
                f" {plan.rail_unseen} {one_or_more(plan.action.resource)} a rail could not "
                "check would not be sent (RailUnverified: exit 3)",
            )
        )
    if plan.fatal is not None:
        console.print(
            Text.assemble(
                ("the run would stop:", "bold red"),
                f" {literal(plan.fatal)} (credentials or permission: exit 4)",
            )
        )
    for pair, perm in plan.permission.items():
        if perm.allowed is False:
            console.print(
                Text.assemble(
                    ("not permitted", "bold red"),
                    f" in {literal(pair.label)}: {literal(perm.code)} "
                    f"{literal(perm.message or '')}",
                )
            )
        elif perm.allowed is None:
            why = " ".join(literal(x) for x in (perm.code, perm.message) if x)
            console.print(f"permission in {literal(pair.label)} not checked: {why}", markup=False)
    if plan.unknown:
        first = plan.unknown[0]
        console.print(
            Text.assemble(
                (
                    f"{len(plan.unknown)} {one_or_more(plan.action.resource)} could not be read",
                    "magenta",
                ),
                f" (e.g. {literal(first.id)}: {literal(first.reason)})",
            )
        )
    if plan.unchecked:
        console.print(plan.unchecked, markup=False, style="yellow")
    if plan.rows and not plan.permission and not plan.acting_ids():
        missing = sum(r.prediction is Prediction.DOES_NOT_EXIST for r in plan.rows)
        console.print(
            f"permission not checked: none would act; the run would send the {missing} "
            "that do not exist, to find them missing"
            if missing
            else "permission not checked: no ID would be sent, so the run would make no call",
            highlight=False,
        )
    if not plan.protection_checked and plan.action.name in PROTECTION_ATTRIBUTES:
        console.print("protection not checked (--no-check-protection)")
    console.print(f"the plan cost {_calls_text(plan.calls)} call(s)", highlight=False)
    console.print(estimate_text(estimate), highlight=False)


def _bucket_json(bucket: Bucket | None) -> dict[str, float] | None:
    return None if bucket is None else {"burst": bucket.burst, "rate": bucket.rate}


def plan_json(plan: Plan, estimate: Estimate) -> dict[str, Any]:
    """The plan for ``--output json``: every row, the counts, the calls and the estimate."""

    def row(r: Row) -> dict[str, Any]:
        info = r.info
        return {
            "id": r.id,
            "region": r.pair.region,
            "account": r.pair.account,
            "prediction": r.prediction.value,
            "reason": r.reason,
            "state": info.state if info else None,
            "type": info.type if info else None,
            "name": info.name if info else None,
            "launch_time": info.launch_time.isoformat() if info and info.launch_time else None,
            "tags": dict(info.tags) if info else {},
        }

    return {
        "action": plan.action.name,
        "api": plan.action.api,
        "total": plan.total,
        "counts": plan.counts,
        "would_fail": len(plan.would_fail),
        "unknown": len(plan.unknown),
        "rail_unverified": plan.rail_unseen,
        "would_act": sum(len(ids) for ids in plan.acting_ids().values()),
        "protection_checked": plan.protection_checked,
        "unchecked": plan.unchecked,
        "fatal": plan.fatal,
        "calls": dict(plan.calls),
        "permission": [
            {
                "region": pair.region,
                "account": pair.account,
                "allowed": perm.allowed,
                "checked_id": perm.checked_id,
                "code": perm.code,
                "message": perm.message,
            }
            for pair, perm in plan.permission.items()
        ],
        "estimate": {
            "api": estimate.api,
            "batch_size": estimate.batch_size,
            "calls_bucket": _bucket_json(estimate.calls_bucket),
            "instances_bucket": _bucket_json(estimate.instances_bucket),
            "overhead": estimate.overhead,
            "bound_seconds": round(estimate.bound_seconds, 3),
            "expected_seconds": round(estimate.expected_seconds, 3),
            "pairs": [
                {
                    "region": p.pair.region,
                    "account": p.pair.account,
                    "ids": p.ids,
                    "calls": p.calls,
                    "instance_tokens": p.instance_tokens,
                    "bound_seconds": round(p.bound_seconds, 3),
                }
                for p in estimate.pairs
            ],
        },
        "rows": [row(r) for r in plan.rows],
    }


def plan_ids_text(plan: Plan) -> str:
    """The IDs that would be acted on, as ``--ids`` reads them.

    One pair: plain IDs, one a line, after a comment naming the pair (the run's
    ``--region`` and account must match it). Several: CSV with the region and
    account of each, so that one file drives every pair.
    """
    acting = plan.acting_ids()
    pairs = plan.pairs
    if len(pairs) <= 1:
        where = pairs[0].label if pairs else "no pair"
        ids = [i for group in acting.values() for i in group]
        what = (
            f"{len(ids)} {one_or_more(plan.action.resource)} in {where} that "
            f"{plan.action.name} would act on"
        )
        head = f"# swarm plan: {what}\n"
        return head + "".join(f"{i}\n" for i in ids)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    # As --ids reads it: an instance list's column, or swarm list's id for other resources.
    column = "instance_id" if plan.action.resource == "instance" else "id"
    writer.writerow([column, "region", "account"])
    for pair, ids in acting.items():
        for i in ids:
            writer.writerow([i, pair.region, pair.account or ""])
    return buffer.getvalue()


def write_plan_ids(plan: Plan, path: str) -> int:
    """Write :func:`plan_ids_text` to ``path``; return how many IDs it holds."""
    from .files import create_text

    try:
        handle = create_text(path)  # never through a symbolic link
    except OSError as exc:
        # A path that cannot be created (/proc/x, a read-only mount): the plan was made,
        # its file was not: as with a full disk.
        raise error_for(
            EXIT_LEDGER, f"--plan-out {literal(path)}: {exc.strerror or exc}; no plan file written"
        ) from exc
    regular = stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
    try:
        with handle:
            handle.write(plan_ids_text(plan))
    except OSError as exc:
        # A file cut short would read as a shorter plan: none at all is left (a device
        # named as the file, /dev/full say, is left alone).
        if regular:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise error_for(
            EXIT_LEDGER, f"--plan-out {literal(path)}: {exc.strerror or exc}; no plan file written"
        ) from exc
    return sum(len(ids) for ids in plan.acting_ids().values())


def plan_json_text(plan: Plan, estimate: Estimate) -> str:
    return json.dumps(plan_json(plan, estimate), sort_keys=True) + "\n"
