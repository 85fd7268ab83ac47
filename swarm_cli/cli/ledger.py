"""``swarm ledger``: what a ledger (or several, merged) says is left to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..ledger import (
    STATUSES,
    CutShort,
    Damaged,
    LedgerError,
    Record,
    describe_damage,
    fold_files,
)
from ..run import EXIT_USAGE
from .common import Output, OutputOpt, ledger_app


@ledger_app.command("failed")
def ledger_failed(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Ledger files; several are merged.", exists=True, dir_okay=False),
    ],
    action: Annotated[str, typer.Option("--action", help="Which action's intents.")] = "terminate",
    missing: Annotated[
        bool,
        typer.Option("--missing", help="Also list the IDs EC2 said do not exist."),
    ] = False,
) -> None:
    """Print the IDs worth retrying (failed or pending), one per line.

    Pending means not known to be done: never sent, or in flight when the run was
    stopped or killed. Feed them back:
    swarm terminate --ids <(swarm ledger failed swarm-ledger.jsonl)
    """
    wanted = {"failed", "pending"} | ({"missing"} if missing else set())
    state = _fold_ledgers(paths)
    typer.echo(
        "".join(
            f"{instance_id}\n"
            for (act, instance_id), record in state.items()
            if act == action and record.status in wanted
        ),
        nl=False,
    )


@ledger_app.command("summary")
def ledger_summary(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Ledger files; several are merged.", exists=True, dir_okay=False),
    ],
    output: OutputOpt = Output.text,
) -> None:
    """Count intents by their merged state, per action."""

    state = _fold_ledgers(paths)
    counts: dict[str, dict[str, int]] = {}
    for (act, _), record in state.items():
        per = counts.setdefault(act, dict.fromkeys(STATUSES, 0))
        per[record.status] += 1
    if output is Output.json:
        typer.echo(json.dumps({"actions": counts}, indent=2))
        return
    for act, per in counts.items():
        typer.echo(f"{act}: " + " · ".join(f"{n} {s}" for s, n in per.items()))


def _fold_ledgers(paths: list[Path]) -> dict[tuple[str, str], Record]:
    """Merge ledgers; lines that do not parse (a crash mid-write) are skipped with a warning."""
    damaged: list[Damaged] = []
    cut_short: list[CutShort] = []
    try:
        state = fold_files((str(p) for p in paths), damaged, cut_short)
    except LedgerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if damaged:
        typer.echo(f"warning: {describe_damage(damaged)}", err=True)
    for run in cut_short:
        typer.echo(f"warning: {run.describe()}", err=True)
    return state
