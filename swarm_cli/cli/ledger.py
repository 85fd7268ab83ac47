"""``swarm ledger``: what a ledger (or several, merged) says is left to do."""

from __future__ import annotations

import csv
import io
import sys
from collections import Counter
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from ..actions import ACTIONS
from ..errors import EXIT_FAILED, UsageError
from ..ledger import (
    NOT_CHECKED_CODE,
    STATUSES,
    CutShort,
    Damaged,
    Record,
    WriteAheadCheck,
    describe_damage,
    fold_files,
    in_use,
    merge_files,
    permanent,
    read_records,
    undone,
)
from ..ledger.merge import UNDOES, UNDONE_CODE, hidden_elsewhere
from ..targets import Target, Targets, TargetsError, read_ids
from ..text import literal, shell_quote
from .common import ledger_app
from .exits import emit_json
from .options import Output, OutputOpt

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


def _same_place(record: Record, target: Target) -> bool:
    """Whether a record's place is the list line's: the same region and account wherever
    both name one (a line or a record that names none is the default's)."""
    if record.region and target.region and record.region != target.region:
        return False
    return not (record.account and target.account and record.account != target.account)


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
    ids: Annotated[
        Path | None,
        typer.Option(
            "--ids",
            metavar="LIST",
            help="The ID list the runs were meant to cover: list every ID of it that no "
            "ledger shows done, those of which no ledger has any record included (a shard "
            "whose job died); exit 1 if there is any.",
            dir_okay=False,
        ),
    ] = None,
    retryable: Annotated[
        bool,
        typer.Option(
            "--retryable",
            help="Leave out permanent failures (protected, wrong state, malformed ID), "
            "which a retry would only repeat; they are counted on stderr.",
        ),
    ] = False,
    exclude_ids: Annotated[
        Path | None,
        typer.Option(
            "--exclude-ids",
            metavar="FILE",
            help="With --ids: the IDs the runs were told never to act on (their own "
            "--exclude-ids): not left, whatever the ledgers hold of them.",
            dir_okay=False,
        ),
    ] = None,
    missing_ok: Annotated[
        bool,
        typer.Option(
            "--missing-ok",
            help="With --ids: leave out the IDs EC2 said do not exist (gone long ago), as "
            "the runs' own --missing-ok does. Without it, --ids counts them as left: an "
            "ID listed in the wrong region or account is not done.",
        ),
    ] = False,
) -> int:
    """Print the IDs worth retrying (failed or pending), one per line.

    Pending means not known to be done: never sent, in flight when the run was stopped or killed, or never answered. Feed them back through a file, so that a list that cannot be made stops the retry: swarm ledger failed --retryable --action terminate swarm-ledger.jsonl >left.txt && swarm terminate --ids left.txt --resume --yes

    Exit 1 when the list may not be the whole or final (a run stopped while recording its intents, a ledger with no records, damaged lines that may have held intents, a run still writing a ledger), or with --ids when any ID of the list is left; a gate checks the exit code as well as the list: if ! swarm ledger failed L >left.txt || [ -s left.txt ]; then exit 1; fi
    """  # noqa: E501 - rich keeps a docstring's line breaks
    if missing_ok and ids is None:
        raise UsageError("--missing-ok is for a gate with --ids LIST")
    if exclude_ids is not None and ids is None:
        raise UsageError("--exclude-ids is for a gate with --ids LIST")
    if missing_ok and missing:
        raise UsageError("--missing lists what --missing-ok leaves out: give one of them")
    # A gate (--ids) asks what is not known done: an ID EC2 did not find where it was
    # sent (the wrong region, a typo) is not done, unless the runs said it may be so.
    with_missing = missing or (ids is not None and not missing_ok)
    wanted = {"failed", "pending"} | ({"missing"} if with_missing else set())
    cut_short: list[CutShort] = []
    empty: list[str] = []
    hidden: list[int] = []
    live: list[str] = []
    state = _fold_ledgers(paths, cut_short, empty, hidden, live=live)
    actions = sorted({act for act, _ in state})
    if action is None:
        if len(actions) > 1:
            raise UsageError(f"the ledger holds {', '.join(actions)}: pass --action to say which")
        action = actions[0] if actions else "terminate"
        if not _known(action):
            # Its lines parse, its action is none of swarm's: no command to name, no gate.
            raise UsageError(
                f"the ledger's records are of {literal(action)}, which this swarm does not "
                "know (written by another tool, or by a newer swarm)"
            )
    else:
        action = _recorded_name(action)
        if actions and action not in actions and ids is None:
            # A typo must not pass a gate: nothing of it in the ledger is not "all done"
            # (with --ids, the list's IDs in no ledger are listed).
            raise UsageError(
                f"--action {action}: the ledger holds no {action} intents "
                f"(it holds {', '.join(actions)})"
            )
    left = [r for (act, _), r in state.items() if act == action and r.status in wanted]
    # Sent again to the wrong place (a list without its region column) and not found
    # there: still left where the ledger had it, not missing.
    unfound_any = any(act == action and r.status == "missing" for (act, _), r in state.items())
    moved = hidden_elsewhere(_records(paths), state, action) if unfound_any else []
    shown = {r.id for r in moved}
    if moved:
        where = ", ".join(sorted({"/".join(filter(None, (r.account, r.region))) for r in moved}))
        typer.echo(
            f"note: {len(moved)} ID(s) left to do in one region or account were sent again "
            f"to another and not found there: listed where they are left ({literal(where)})",
            err=True,
        )
        left = [r for r in left if r.id not in shown] + [r for r in moved if r.status in wanted]
    stuck = [r for r in left if permanent(r)]
    if retryable:
        left = [r for r in left if not permanent(r)]
    rows = [(r.id, r.region, r.account) for r in left]
    never: list[Target] = []
    if ids is not None:
        if exclude_ids is not None and str(exclude_ids) == "-" and str(ids) == "-":
            raise UsageError("--ids - and --exclude-ids - cannot both read standard input")
        targets = _read_list(ids, action)
        if not targets.items:
            # An empty list passes nothing: most often the command that should have made
            # it failed, and a gate over it would be green whatever the ledgers hold.
            typer.echo(
                f"{literal(str(ids))} lists no ID: nothing to check the ledgers against",
                err=True,
            )
            return EXIT_FAILED
        excluded = 0
        if exclude_ids is not None:
            spared = {t.id for t in _read_list(exclude_ids, action).items}
            if not spared:
                typer.echo(
                    f"warning: --exclude-ids {literal(str(exclude_ids))} lists no ID: nothing "
                    "is excluded",
                    err=True,
                )
            kept = [t for t in targets.items if t.id not in spared]
            excluded, targets.items = len(targets.items) - len(kept), kept
        listed = {t.id for t in targets.items}
        rows = [row for row in rows if row[0] in listed]
        stuck = [r for r in stuck if r.id in listed]
        never = [t for t in targets.items if (action, t.id) not in state]
        rows += [(t.id, t.region, t.account) for t in never]
        # Done in another region or account than the list's: not done where it names (as a
        # resume of the list finds it, and sends it there).
        elsewhere = [
            t
            for t in targets.items
            if (record := state.get((action, t.id))) is not None
            and record.status not in wanted
            and not _same_place(record, t)
        ]
        rows += [(t.id, t.region, t.account) for t in elsewhere]
    # (An ID of --ids that no ledger holds has no place of its own: it is not another.)
    places = {(account, region) for _, region, account in rows if region or account}
    if form is ListFormat.csv or (
        form is ListFormat.auto and (len(places) > 1 or any(a for a, _ in places))
    ):
        # Ledger fields are anyone's text once the file is: shown literally, one a line,
        # and quoted where one holds a comma or a quote (a column would shift).
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(
            [(_id_column(action), "region", "account")]
            + [
                (literal(i), literal(region or ""), literal(account or ""))
                for i, region, account in rows
            ]
        )
        typer.echo(buffer.getvalue(), nl=False)
    else:
        typer.echo("".join(f"{literal(i)}\n" for i, _, _ in rows), nl=False)
        if len(places) > 1:
            typer.echo(
                f"note: these IDs are in {len(places)} accounts/regions, which --format ids "
                "leaves out; --format csv keeps each in its place",
                err=True,
            )
        elif form is ListFormat.ids and rows and places and places != {(None, None)}:
            ((account, region),) = places
            place = literal("/".join(x for x in (account, region) if x))
            hint = (
                f"give their run --region {literal(region)}"
                if region and not account
                else "--format csv keeps it"
            )
            typer.echo(
                f"note: these IDs are in {place}, which --format ids leaves out: {hint}",
                err=True,
            )
    if stuck:
        codes = Counter(r.code for r in stuck)
        typer.echo(
            f"{len(stuck)} failed permanently ("
            + ", ".join(f"{n} {code}" for code, n in sorted(codes.items()))
            + "): a retry fails again unless that changes"
            + ("; left out (--retryable)" if retryable else "; --retryable leaves them out"),
            err=True,
        )
    unwaited = [r for r in left if r.code == NOT_CHECKED_CODE and r.waits is not None]
    unwaited = [r for r in unwaited if ids is None or r.id in listed]
    if unwaited:
        # Their run's lines say it was to wait; nothing after them says it did (a kill).
        where = shell_quote(str(paths[0])) if len(paths) == 1 else "LEDGER"
        typer.echo(
            f"note: {len(unwaited)} of them their run accepted and was to --wait for "
            f"({literal(unwaited[0].waits or '')}), and no record of its wait follows (killed?): "
            f"a resume that waits looks them up and waits for them: swarm {action} --ids "
            f"LIST --ledger {literal(where)} --resume --wait (LIST: the IDs above; with the "
            "run's --region or --endpoint-url)",
            err=True,
        )
    if not with_missing:
        unfound = sum(
            1
            for (act, _), r in state.items()
            if act == action and r.status == "missing" and r.id not in shown
        )
        if unfound:
            # Not done either: most often another region or account than the run's.
            typer.echo(
                f"note: {unfound} ID(s) EC2 said do not exist where they were sent are not "
                "listed (another region or account, a typo?): "
                + ("as --missing-ok asks" if missing_ok else "--missing lists them"),
                err=True,
            )
    if ids is not None:
        verb = _verb(action)
        absent = sum(1 for r in left if r.status == "missing" and r.id in listed)
        # --retryable shortens the list to feed a retry, not what the gate finds left.
        kept_out = len(stuck) if retryable else 0
        typer.echo(
            f"{len(rows) + kept_out} of {len(targets.items)} ID(s) of {literal(str(ids))} "
            f"not known {verb}"
            + (f" ({kept_out} failed permanently, not listed)" if kept_out else "")
            + (f" ({excluded} excluded)" if excluded else "")
            + (f", {len(never)} of them in no ledger at all" if never else "")
            + (
                f", {len(elsewhere)} of them done in another region or account than the list's"
                if elsewhere
                else ""
            )
            + (
                f", {absent} of them that EC2 said do not exist where they were sent "
                "(another region or account, or gone long ago: --missing-ok leaves those out)"
                if absent
                else ""
            ),
            err=True,
        )
        if rows or kept_out:
            return EXIT_FAILED
    if ids is None and hidden:
        typer.echo(
            f"warning: {hidden[0]} intent(s) have no readable record: the damaged lines may "
            "have held them, so this list may not be the whole; give the ID list the runs "
            "were meant to cover (--ids LIST) to list every ID of it not known done",
            err=True,
        )
    if live or (ids is None and (cut_short or empty or hidden)):
        # A run is still sending what the ledger holds pending: neither the list nor a
        # gate's answer is final. Some intents of a run never reached the ledger, or
        # cannot be read: this list is not the whole. With --ids it is the whole: an ID of
        # the list that no ledger holds is in it.
        return EXIT_FAILED
    return 0


def _id_column(action: str) -> str:
    """The ID column of a list of ``action``'s IDs: instance_id, or the resource's own
    (volume_id), as --ids reads them back."""
    from ..actions.operations import RESOURCE_OPERATIONS

    op = RESOURCE_OPERATIONS.get(action)
    return op.id_rule.columns[0] if op is not None else "instance_id"


def _known(action: str) -> bool:
    """Whether ``action`` is a name swarm records (an action or a resource operation)."""
    from ..actions.operations import RESOURCE_OPERATIONS

    return action in ACTIONS or action in RESOURCE_OPERATIONS


def _recorded_name(action: str) -> str:
    """The name the ledger records ``action`` under: ``stop-instances`` is ``stop``."""
    from ..actions.operations import OPERATIONS

    op = OPERATIONS.get(action)
    name = op.instance_action if op is not None and op.instance_action else action
    if name not in ACTIONS and name not in OPERATIONS:
        known = ", ".join([*ACTIONS, *(n for n, o in OPERATIONS.items() if not o.instance_action)])
        raise UsageError(f"--action {action}: no such action; swarm records {known}")
    return name


def _verb(action: str) -> str:
    from ..actions.operations import RESOURCE_OPERATIONS

    if action in ACTIONS:
        return ACTIONS[action].verb
    op = RESOURCE_OPERATIONS.get(action)
    return op.verb if op is not None else f"done ({action})"


def _read_list(path: Path, action: str) -> Targets:
    """``--ids LIST`` of ``ledger failed``: every bad line is an error (exit 2)."""
    from ..actions.operations import RESOURCE_OPERATIONS
    from ..targets import INSTANCES

    op = RESOURCE_OPERATIONS.get(action)
    try:
        stdin = sys.stdin if str(path) == "-" else None
        targets = read_ids(str(path), stdin, rule=op.id_rule if op is not None else INSTANCES)
    except TargetsError as exc:
        raise UsageError(str(exc)) from None
    if targets.bad:
        first = targets.bad[0]
        raise UsageError(
            f"{targets.bad_count()} in {path}, e.g. {targets.unit} {first.line}: {first.reason}"
        )
    return targets


@ledger_app.command("summary")
def ledger_summary(
    paths: LedgersArg,
    output: OutputOpt = Output.text,
) -> None:
    """Count intents by their merged state, per action.

    The counts are what the ledgers hold: with --output json, "incomplete" says what
    they may lack (damaged lines, runs stopped while recording their intents, ledgers
    with no record, intents no readable record shows, ledgers a run is still writing);
    `ledger failed` is the gate.
    """
    empty: list[str] = []
    cut: list[CutShort] = []
    hidden: list[int] = []
    damage: list[int] = []
    live: list[str] = []
    state = _fold_ledgers(paths, cut, empty=empty, hidden=hidden, damage=damage, live=live)
    counts: dict[str, dict[str, int]] = {}
    # Successes a later run of the opposite action (a start after a stop) left unknown.
    undone: dict[str, int] = {}
    # Successes of a run that was to --wait and no record of its wait follows (a kill).
    unwaited: dict[str, int] = {}
    for (act, _), record in state.items():
        per = counts.setdefault(act, dict.fromkeys(STATUSES, 0))
        per[record.status] += 1
        if record.code == UNDONE_CODE:
            undone[act] = undone.get(act, 0) + 1
        elif record.code == NOT_CHECKED_CODE and record.waits is not None:
            unwaited[act] = unwaited.get(act, 0) + 1
    unknown = [act for act in counts if not _known(act)]
    if output is Output.json:
        incomplete = {
            "damaged_lines": sum(damage),
            "cut_short_runs": sorted({c.run for c in cut}),
            "empty_ledgers": empty,
            "unaccounted_intents": sum(hidden),
            "being_written": live,
        }
        emit_json(
            {
                "actions": counts,
                "undone": undone,
                "unwaited": unwaited,
                "unknown": unknown,
                "incomplete": incomplete,
            }
        )
        return
    for act, per in counts.items():
        line = f"{literal(act)}: " + " · ".join(f"{n} {s}" for s, n in per.items())
        if act in unknown:
            line += " (no action this swarm knows: written by another tool, or a newer swarm)"
        if undone.get(act):
            line += (
                f" ({undone[act]} of the pending done once, then a later run of "
                f"{' or '.join(sorted(UNDOES.get(act, ())))} may have undone it)"
            )
        if unwaited.get(act):
            line += (
                f" ({unwaited[act]} of the pending accepted, and their run's --wait never "
                "said they got there)"
            )
        typer.echo(line)


def _fold_ledgers(
    paths: list[Path],
    cut_short: list[CutShort] | None = None,
    empty: list[str] | None = None,
    hidden: list[int] | None = None,
    damage: list[int] | None = None,
    live: list[str] | None = None,
) -> dict[tuple[str, str], Record]:
    """Merge ledgers; lines that do not parse (a crash mid-write) are skipped with a warning.

    Runs whose intents were not all written ahead go to ``cut_short`` as well,
    and ledgers without a single record to ``empty``, each with a warning. When
    lines were skipped and intents of whole blocks are unaccounted for (the
    skipped lines may have held them), their count goes to ``hidden``.
    """

    def read(damaged: list[Damaged], short: list[CutShort]) -> dict[tuple[str, str], Record]:
        watch = WriteAheadCheck()
        state = fold_files(map(str, paths), damaged, short, empty, watch)
        if cut_short is not None:
            cut_short.extend(short)
        unaccounted = watch.unaccounted() if damaged else 0
        if unaccounted and hidden is not None:
            hidden.append(unaccounted)
        if damage is not None:
            damage.append(len(damaged))
        return state

    writing = [str(path) for path in paths if in_use(str(path))]
    if live is not None:
        live.extend(writing)
    for path in writing:
        # A run holds it: its intents are still being sent, and written.
        typer.echo(
            f"warning: {literal(path)} is being written by a run: it holds what that run "
            "has recorded so far, and its pending intents may be on their way; read it "
            "again once that run has ended",
            err=True,
        )
    state = _reading(read)
    for path in empty or ():
        if path not in writing:
            _no_records(path)
    # A stop's success older than a start of the same instance (or the other way round)
    # is not known to hold: listed as pending, not counted done.
    return undone(state)


def _records(paths: list[Path]) -> list[Record]:
    """Every record of ``paths`` (damage was said when they were folded)."""
    return [r for path in paths for r in read_records(str(path), [])]


def _no_records(path: str) -> None:
    typer.echo(
        f"warning: {path} holds no records: a run stopped before recording its first "
        "intent sent nothing from it; this ledger cannot say what is left",
        err=True,
    )


T = TypeVar("T")


def _reading(read: Callable[[list[Damaged], list[CutShort]], T]) -> T:
    """Run ``read``; an unreadable ledger is a one-line error (exit 2), damage a one-line
    warning."""
    damaged: list[Damaged] = []
    cut_short: list[CutShort] = []
    result = read(damaged, cut_short)  # a LedgerError ends the command: see cli.exits
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
) -> int:
    """Merge ledgers (e.g. one per shard) into one, keeping every record of them once.

    Merging is order-free: any order, any grouping, and merging twice give the same
    ledger, from which ledger failed, --resume and a rollback read what they read from
    the inputs. The output is replaced atomically, so it may be one of the inputs; an
    output that is a ledger holding records the inputs lack is refused (exit 2). A run
    stopped while recording its intents keeps those it recorded, so that the merged
    ledger still says its list was not all recorded. Exit 1 when damaged lines may
    have held intents the merged ledger then lacks, an input holds no records, or a run
    is still writing an input (the merged ledger holds its records so far).
    """
    empty: list[str] = []
    hidden: list[int] = []

    def merge(damaged: list[Damaged], cut_short: list[CutShort]) -> int:
        watch = WriteAheadCheck()
        count = merge_files([str(p) for p in paths], str(out), damaged, cut_short, empty, watch)
        if damaged and watch.unaccounted():
            hidden.append(watch.unaccounted())
        return count

    live = [given for given in paths if in_use(str(given))]
    for given in live:
        # Merged as far as written: the run's later records are not in the output.
        typer.echo(
            f"warning: {literal(str(given))} is being written by a run: the merged ledger "
            "holds its records so far; merge again once that run has ended",
            err=True,
        )
    count = _reading(merge)
    for path in empty:
        _no_records(path)
    typer.echo(f"merged {len(paths)} ledger(s) into {out}: {count} intent(s)", err=True)
    if hidden:
        # The merged ledger has no damaged line left to say so: this is the last word.
        typer.echo(
            f"warning: {hidden[0]} intent(s) have no readable record: the damaged lines may "
            f"have held them, and {out} does not; check it against the ID list the runs "
            "were meant to cover (swarm ledger failed --ids LIST)",
            err=True,
        )
        return EXIT_FAILED
    if empty or live:
        # A ledger with no records (a run killed before its first intent), or one a run is
        # still writing: the merged one no longer shows it, so this is the last word, as
        # for damage.
        return EXIT_FAILED
    return 0
