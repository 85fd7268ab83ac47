"""Folding records into the state of each intent, and merging ledgers into one."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TypeVar

from ..files import NO_ROOM
from .blocks import CutShort, WriteAheadCheck
from .errors import LedgerError, LedgerWriteError, _reason
from .lock import held_here, hold_ledger
from .paths import _sync_folder
from .reader import Damaged, _read_lines, read_records
from .record import (
    FINAL_SUCCESS,
    MAYBE_DONE,
    NOT_CHECKED_CODE,
    REACHED_CODE,
    Record,
    may_have_acted,
)
from .writer import _CHUNK_BYTES

# Actions that undo each other's end state: after a run of one, the other's success
# says nothing of where the instance is now.
UNDOES: Mapping[str, frozenset[str]] = {
    "stop": frozenset({"start"}),
    "start": frozenset({"stop"}),
}
UNDONE_CODE = "UndoneSince"


T = TypeVar("T")
Latest = dict[tuple[str, str, str], tuple[Record, T]]


def keep_latest(
    latest: Latest[T], record: Record, kept: T, tie: Callable[[T, T], bool] | None = None
) -> None:
    """Keep ``record`` (with ``kept``) in ``latest`` if it is its run's latest record of its
    intent so far: ``latest`` maps (action, id, run) to it. Of two with one seq (the same
    record read twice), the later one read, or the one ``tie(new, old)`` prefers."""
    key = (record.action, record.id, record.run)
    old = latest.get(key)
    if (
        old is None
        or record.seq > old[0].seq
        or (record.seq == old[0].seq and (tie is None or tie(kept, old[1])))
    ):
        latest[key] = (record, kept)


def fold(records: Iterable[Record]) -> dict[tuple[str, str], Record]:
    """The state of each (action, instance) intent: the largest of its records.

    The key is (action, instance id), not (action, account, region, id).
    EC2 instance IDs do not repeat across regions or accounts, and ledgers of
    older swarms hold ``account`` None where a newer run of the same intent
    names the account: keyed by account, the old ``pending`` record would
    stay an intent of its own, listed as left to do forever. The account and
    region of an intent are those of its state, the winning record
    (``record.account``, ``record.region``).
    """
    state: dict[tuple[str, str], Record] = {}
    for record in records:
        key = (record.action, record.id)
        current = state.get(key)
        if current is None or _beats(record, current):
            state[key] = record
    return state


def hidden_elsewhere(
    records: Iterable[Record], state: Mapping[tuple[str, str], Record], action: str
) -> list[Record]:
    """Intents of ``action`` left to do (pending or failed) in one place that a later
    ``missing`` in another place hides in ``state``: an ID sent again to the wrong region
    is not found there, which says nothing of where it is left. The latest record of
    each such place, one per ID."""
    hidden = {
        r.id
        for (act, _), r in state.items()
        if act == action and r.status == "missing" and r.region
    }
    if not hidden:
        return []
    places: dict[tuple[str, str | None, str | None], Record] = {}
    for r in records:
        if r.action != action or r.id not in hidden:
            continue
        key = (r.id, r.region, r.account)
        current = places.get(key)
        if current is None or _beats(r, current):
            places[key] = r
    out: dict[str, Record] = {}
    for (instance, region, account), r in sorted(places.items(), key=lambda kv: str(kv[0])):
        latest = state[(action, instance)]
        elsewhere = (region and region != latest.region) or (
            account and latest.account and account != latest.account
        )
        left = elsewhere and r.status in ("pending", "failed")
        if left and (instance not in out or _beats(r, out[instance])):
            out[instance] = r
    return list(out.values())


def undone(state: Mapping[tuple[str, str], Record]) -> dict[tuple[str, str], Record]:
    """``state`` with each success that a later run's record of an action undoing it
    (a start after a stop, a stop after a start; done, or in flight or unanswered: not
    one refused or never sent) leaves unknown turned ``pending``: the instance may have
    left that state since. Resume then looks it up and ``ledger failed`` lists it,
    instead of trusting the older success. Then each success left that its run's --wait
    never checked turned ``pending`` too (see :func:`unchecked`)."""
    out = dict(state)
    for (action, instance), record in state.items():
        if record.status != "succeeded":
            continue
        for other in UNDOES.get(action, ()):
            later = state.get((other, instance))
            if (
                later is not None
                and _after(later, record)
                # A later call refused (a 4xx), or never sent, undid nothing.
                and (later.status == "succeeded" or may_have_acted(later) or _unsure(later))
            ):
                out[(action, instance)] = replace(
                    record,
                    status="pending",
                    code=UNDONE_CODE,
                    message=f"{other} since (run {later.run}, {later.status})",
                )
                break
    return unchecked(out)


def unchecked(state: Mapping[tuple[str, str], Record]) -> dict[tuple[str, str], Record]:
    """``state`` with each success of a run that was to --wait for it (its records name
    the state, ``waits``) and that no record of the wait follows turned ``pending``
    (NotChecked): the run ended (a kill, a ledger that failed, its --rollback's undo
    stopped short) after the call and before its wait said anything, and the instance
    may still be on its way (or have left that state since). A wait that ended wrote its
    own record of every instance it was for, those a resume found on their way there or
    there already too. A final success (terminate's) stays done."""
    out = dict(state)
    for key, record in state.items():
        if (
            record.status == "succeeded"
            and record.waits is not None
            and record.code != REACHED_CODE
            and record.action not in FINAL_SUCCESS
        ):
            out[key] = replace(
                record,
                status="pending",
                code=NOT_CHECKED_CODE,
                message=(
                    f"its run was to --wait for it ({record.waits}) and no record of the wait "
                    f"follows (the run ended before the wait did: a kill, a ledger that "
                    f"failed, an undo stopped short); {MAYBE_DONE}"
                ),
            )
    return out


def _unsure(record: Record) -> bool:
    """A failure that does not say the call did nothing: a 5xx, which EC2 may have carried
    out before it failed (a refusal is a 4xx, or swarm's own with no HTTP status)."""
    return record.status == "failed" and (record.http_status or 0) >= 500


def _after(later: Record, record: Record) -> bool:
    """Whether ``later`` acted after ``record``: by their runs' starts, or where both
    are successes of two runs, by when each took effect (runs on two ledgers may
    overlap: the one that started first may have acted last)."""
    if later.status == record.status == "succeeded" and later.run != record.run:
        a, b = _took_effect(later), _took_effect(record)
        if a is not None and b is not None and a != b:
            return a > b
    return _run_key(later) > _run_key(record)


def _took_effect(record: Record) -> datetime | None:
    """When a success took effect: when its --wait saw it there (a Reached record is
    written when the wait ends, later), else when it was answered."""
    text = record.reached or record.ts
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _run_key(record: Record) -> tuple[str, str, str, int]:
    """When a record's run started, then the run, then the record within it."""
    return (record.started or record.ts, record.run, record.ts, record.seq)


def _beats(record: Record, current: Record) -> bool:
    mine, theirs = record.order(), current.order()
    if mine != theirs:
        return mine > theirs
    # Equal orders mean the same run and seq: the same record, read twice, in
    # any sane ledger. Comparing the rest keeps the merge a semilattice even
    # for ledgers that are not (a reused run id), so input order never matters.
    return record.to_json() > current.to_json()


def fold_files(
    paths: Iterable[str],
    damaged: list[Damaged] | None = None,
    cut_short: list[CutShort] | None = None,
    empty: list[str] | None = None,
    watch: WriteAheadCheck | None = None,
) -> dict[tuple[str, str], Record]:
    """Merge the ledgers of any number of runs or shards, in any order.

    Runs whose write-ahead is incomplete go to ``cut_short``; ledgers that
    hold no record at all (a run killed before its first intent) to ``empty``.
    ``watch``, when given, is the check the records pass through (to ask it more).
    """
    watch = WriteAheadCheck() if watch is None else watch
    state = fold(watch(r) for path in paths for r in _counted(path, damaged, empty))
    if cut_short is not None:
        cut_short.extend(watch.cut_short())
    return state


def _counted(path: str, damaged: list[Damaged] | None, empty: list[str] | None) -> Iterator[Record]:
    """The records of ``path``; ``path`` goes to ``empty`` when it holds none."""
    count = 0
    for record in read_records(path, damaged):
        count += 1
        yield record
    if not count and empty is not None:
        empty.append(path)


def merge_files(
    paths: Sequence[str],
    out: str,
    damaged: list[Damaged] | None = None,
    cut_short: list[CutShort] | None = None,
    empty: list[str] | None = None,
    watch: WriteAheadCheck | None = None,
) -> int:
    """Write the records of ``paths`` to ``out`` as one ledger; return its intents' count.

    Every record of every input, once (the same run and seq read twice is one line: the
    line as read, so every field, run, seq, ts and fields a later swarm of this format
    added, is kept), runs in the order they began, each run's records in the order it
    wrote them. Folding ``out`` gives the state folding ``paths`` gives, and a resume,
    ``ledger failed`` or a rollback reads from it what it reads from ``paths`` (a
    rollback reads a run's records under its winner: a call's "changed nothing" under
    its wait's success). ``out`` is replaced atomically (a file beside it, synced, then
    renamed over it), so it may be one of ``paths``, and a failure leaves it as it was.
    Runs whose write-ahead is incomplete in ``paths`` go to ``cut_short`` (their
    records are kept, so the merged ledger still shows it). Returns the number of
    intents.

    Raises :class:`LedgerError` when an input cannot be read or ``out``
    cannot be written, and :class:`LedgerVersionError` at a record of a newer
    format (dropping it would lose outcomes).
    """
    if not out or out == "-":
        raise LedgerError(f"ledger {out!r}: pass a file path for the merged ledger")
    if out not in paths and os.path.isfile(out) and os.path.getsize(out):
        # A file that is not a ledger (an ID list, notes) is not one to replace.
        for _ in read_records(out):
            break  # one record: a ledger; read_records refuses a file with none
    # A ledger a run is writing is not replaced under it (its records would go to the
    # file the merge unlinks): refused, as a second run on it is.
    busy = "a merge would replace the file it appends to; merge once that run has ended"
    # Held if it is there (a link, a device or a FIFO is refused below, never opened);
    # if not, held before it is replaced should a run have made it meanwhile. Not made
    # here: a merge stopped by a signal leaves no empty file behind.
    plain = os.path.isfile(out) and not os.path.islink(out)
    with hold_ledger(out, busy) if plain else contextlib.nullcontext():
        return _merge_into(paths, out, damaged, cut_short, empty, watch, busy)


def _merge_into(
    paths: Sequence[str],
    out: str,
    damaged: list[Damaged] | None,
    cut_short: list[CutShort] | None,
    empty: list[str] | None,
    watch: WriteAheadCheck | None,
    busy: str,
) -> int:
    watch = WriteAheadCheck() if watch is None else watch
    intents: set[tuple[str, str]] = set()
    # Every record, once: a run's records under its winner (a wait's success over the
    # call's "changed nothing", an undo's under its wait) are what a rollback reads.
    kept: dict[tuple[str, int, str, str], tuple[Record, bytes]] = {}
    began: dict[str, str] = {}  # each run's start (or its first record's time)
    for path in paths:
        count = 0
        for record, raw in _read_lines(path, damaged):
            count += 1
            watch(record)
            intents.add((record.action, record.id))
            mark = (record.run, record.seq, record.action, record.id)
            current = kept.get(mark)
            if (
                current is None
                or _beats(record, current[0])
                # The same record with other unknown fields: either line, but always the same one.
                or (record == current[0] and raw > current[1])
            ):
                kept[mark] = (record, raw)
        if not count and empty is not None:
            empty.append(path)
    if out not in paths and os.path.isfile(out) and not os.path.islink(out):
        # A ledger ``out`` already is (another shard's, a typo) is replaced only when the
        # inputs hold every record of it: nothing of it is lost.
        lost = sum(1 for r in read_records(out) if (r.run, r.seq, r.action, r.id) not in kept)
        if lost:
            raise LedgerError(
                f"{out} is a ledger holding {lost} record(s) the inputs do not: the merge "
                "would replace them; name it as an input too, or choose another --out"
            )
    cut = watch.cut_short()
    for record, _ in kept.values():  # of the records kept: a merge of it orders them alike
        when = record.started or record.ts or ""
        began[record.run] = min(began.get(record.run, when), when)
    # Runs in the order they began, each run's records in the order it wrote them: one
    # order, so a merge of a merge is the same file.
    order = sorted(kept, key=lambda mark: (began[mark[0]], *mark))
    lines = [kept[mark][1].rstrip(b"\r\n") + b"\n" for mark in order]
    # A run that made ``out`` since the merge began holds it: refused, not replaced. (One
    # held by this merge from its start is held already; holding it again is harmless.)
    appeared = os.path.isfile(out) and not os.path.islink(out) and not held_here(out)
    with hold_ledger(out, busy) if appeared else contextlib.nullcontext():
        _replace(out, lines)
    if cut_short is not None:
        cut_short.extend(cut)
    return len(intents)


def _unwritten(path: str, err: OSError) -> LedgerError:
    """Why the merged ledger could not be written, as the kind of error it is: no room (a
    full disk, a quota: exit 74), or a path given wrongly (exit 2)."""
    text = f"cannot write the ledger {path}: {_reason(err)}"
    return LedgerWriteError(text) if err.errno in NO_ROOM else LedgerError(text)


def _replace(path: str, lines: Iterable[bytes]) -> None:
    """Make ``path`` hold ``lines``, all or nothing, and durably.

    The rename replaces what is at ``path``: a symbolic link, a device or a FIFO there
    is refused rather than replaced by a file.
    """
    folder = os.path.dirname(path) or "."
    base = os.path.basename(path)
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise LedgerError(f"cannot write the ledger {path}: {_reason(err)}") from None
    else:
        if stat.S_ISLNK(there.st_mode):
            raise LedgerError(f"ledger {path} is a symbolic link: pass the real path")
        if stat.S_ISDIR(there.st_mode):
            raise LedgerError(f"ledger {path} is a folder: pass a file path")
        if not stat.S_ISREG(there.st_mode):
            raise LedgerError(f"ledger {path} is not a regular file")
    try:
        # A name no other merge picks; O_EXCL never opens someone else's file.
        temp = os.path.join(folder, f".{base}.{secrets.token_hex(8)}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise _unwritten(path, err) from None
    try:
        # A ledger someone made private stays private once merged into.
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
        block: list[bytes] = []
        size = 0
        for line in lines:
            block.append(line)
            size += len(line)
            if size >= _CHUNK_BYTES:
                _write_fd(fd, b"".join(block))
                block, size = [], 0
        _write_fd(fd, b"".join(block))
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temp, path)
    except OSError as err:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise _unwritten(path, err) from None
    # The rename is durable only once the folder is synced.
    try:
        _sync_folder(path)
    except OSError as err:
        raise LedgerError(
            f"wrote the ledger {path} but cannot sync its folder: {_reason(err)}"
        ) from None


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        count = os.write(fd, view)
        if count == 0:
            raise OSError(errno.EIO, "the file took no more bytes")
        view = view[count:]


def succeeded_ids(path: str, action: str) -> set[str]:
    """IDs a ledger already holds as done for ``action``: what a resume skips."""
    return {
        record.id
        for (act, _), record in undone(fold(read_records(path))).items()
        if act == action and record.status == "succeeded"
    }
