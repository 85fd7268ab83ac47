"""``swarm ledger``: what a ledger (or several, merged) says is left to do."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from ..ledger import (
    STATUSES,
    CutShort,
    Damaged,
    LedgerError,
    Record,
    describe_damage,
    fold_files,
    merge_files,
)
from ..run import EXIT_FAILED, EXIT_USAGE
from ..text import literal
from .common import Output, OutputOpt, emit_json, ledger_app

LedgersArg = Annotated[
    list[Path],
    typer.Argument(
        metavar="LEDGER...",
        help="Ledger files (runs, shards): several are merged.",
        exists=True,
        dir_okay=False,
    ),
]


class ListFormat(str, Enum):
    auto = "auto"
    ids = "ids"
    csv = "csv"


@ledger_app.command("failed")
def ledger_failed(
    paths: LedgersArg,
    action: Annotated[
        str | None,
        typer.Option(
            "--action",
            metavar="ACTION",
            help="Which action's intents [default: the ledger's only action].",
        ),
    ] = None,
    missing: Annotated[
        bool,
        typer.Option("--missing", metavar="N", help="Also list the IDs EC2 said do not exist."),
    ] = False,
    form: Annotated[
        ListFormat,
        typer.Option(
            "--format",
            help="ids: one ID per line; csv: instance_id,region,account; auto: csv when the "
            "IDs span several accounts or regions, so that feeding them back keeps each "
            "in its place.",
        ),
    ] = ListFormat.auto,
) -> None:
    """Print the IDs worth retrying (failed or pending), one per line.

    Pending means not known to be done: never sent, or in flight when the run was stopped or killed. Feed them back: swarm terminate --ids <(swarm ledger failed swarm-ledger.jsonl)
    """  # noqa: E501 - rich keeps a docstring's line breaks
    wanted = {"failed", "pending"} | ({"missing"} if missing else set())
    cut_short: list[CutShort] = []
    state = _fold_ledgers(paths, cut_short)
    if action is None:
        actions = sorted({act for act, _ in state})
        if len(actions) > 1:
            typer.echo(
                f"error: the ledger holds {literal(', '.join(actions))}: pass --action to say "
                "which",
                err=True,
            )
            raise typer.Exit(EXIT_USAGE)
        action = actions[0] if actions else "terminate"
    left = [r for (act, _), r in state.items() if act == action and r.status in wanted]
    places = {(r.account, r.region) for r in left}
    if form is ListFormat.csv or (
        form is ListFormat.auto and (len(places) > 1 or any(a for a, _ in places))
    ):
        # Ledger fields are anyone's text once the file is: shown literally, one a line.
        rows = "".join(
            f"{literal(r.id)},{literal(r.region or '')},{literal(r.account or '')}\n" for r in left
        )
        typer.echo("instance_id,region,account\n" + rows, nl=False)
    else:
        typer.echo("".join(f"{literal(r.id)}\n" for r in left), nl=False)
    if cut_short:
        # Some intents of a run never reached the ledger: this list is not the whole.
        raise typer.Exit(EXIT_FAILED)


@ledger_app.command("summary")
def ledger_summary(
    paths: LedgersArg,
    output: OutputOpt = Output.text,
) -> None:
    """Count intents by their merged state, per action."""

    state = _fold_ledgers(paths)
    counts: dict[str, dict[str, int]] = {}
    for (act, _), record in state.items():
        per = counts.setdefault(act, dict.fromkeys(STATUSES, 0))
        per[record.status] += 1
    if output is Output.json:
        emit_json({"actions": counts})
        return
    for act, per in counts.items():
        typer.echo(f"{literal(act)}: " + " · ".join(f"{n} {s}" for s, n in per.items()))


def _fold_ledgers(
    paths: list[Path], cut_short: list[CutShort] | None = None
) -> dict[tuple[str, str], Record]:
    """Merge ledgers; lines that do not parse (a crash mid-write) are skipped with a warning.

    Runs whose intents were not all written ahead go to ``cut_short`` as well.
    """

    def read(damaged: list[Damaged], short: list[CutShort]) -> dict[tuple[str, str], Record]:
        state = fold_files(map(str, paths), damaged, short)
        if cut_short is not None:
            cut_short.extend(short)
        return state

    return _reading(read)


T = TypeVar("T")


def _reading(read: Callable[[list[Damaged], list[CutShort]], T]) -> T:
    """Run ``read``; an unreadable ledger is a one-line error, damage a one-line warning."""
    damaged: list[Damaged] = []
    cut_short: list[CutShort] = []
    try:
        result = read(damaged, cut_short)
    except LedgerError as exc:
        typer.echo(f"error: {literal(exc)}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if damaged:
        typer.echo(f"warning: {literal(describe_damage(damaged))}", err=True)
    for run in cut_short:
        typer.echo(f"warning: {literal(run.describe())}", err=True)
    return result


@ledger_app.command("merge")
def ledger_merge(
    paths: LedgersArg,
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="FILE", help="Where to write the merged ledger.")
    ],
) -> None:
    """Merge ledgers (e.g. one per shard) into one: for each intent, its winning record.

    Merging is order-free: any order, any grouping, and merging twice give the same
    ledger. The output is replaced atomically, so it may be one of the inputs.
    """
    count = _reading(
        lambda damaged, cut_short: merge_files(
            [str(p) for p in paths], str(out), damaged, cut_short
        )
    )
    typer.echo(f"merged {len(paths)} ledger(s) into {out}: {count} intent(s)", err=True)
