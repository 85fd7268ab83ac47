"""Reading a ledger: opening it safely, each line checked, damaged lines reported."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from .errors import LedgerError, LedgerVersionError, _reason
from .record import Record
from .writer import _CHUNK_BYTES


@dataclass(frozen=True)
class Damaged:
    path: str
    line: int
    reason: str


def read_records(path: str, damaged: list[Damaged] | None = None) -> Iterator[Record]:
    """Yield the records of one ledger; lines that are not records go to ``damaged``.

    A line cut short by a crash is the usual damage; any other bytes damage
    only their own line. Raises :class:`LedgerError` when the file cannot be
    read, and :class:`LedgerVersionError` at a record of a newer format.
    """
    for record, _ in _read_lines(path, damaged):
        yield record


# A ledger line is a few hundred bytes; one longer than this is skipped unread.
MAX_LINE_BYTES = 1 << 20


def open_ledger(path: str) -> BinaryIO:
    """Open a ledger for reading; refuse anything but a regular file (a FIFO, a device).

    The file is opened without blocking (a FIFO would hang the open) and then
    checked, so a file swapped in after a check cannot get past it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise LedgerError(f"cannot read the ledger {path}: {_reason(err)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, a device)"
            raise LedgerError(f"cannot read the ledger {path}: it is {kind}, not a swarm ledger")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_lines(path: str, damaged: list[Damaged] | None) -> Iterator[tuple[Record, bytes]]:
    """:func:`read_records`, with each record's line as read (for merges to copy).

    Raises :class:`LedgerError` for a file whose whole lines hold no swarm
    record at all: it is not a ledger, and reading it as one would say nothing
    is left. (A file holding only a line cut short, a run killed while writing
    its first, is a ledger without records.)
    A line longer than :data:`MAX_LINE_BYTES` is skipped as damage, unread.
    """
    with open_ledger(path) as handle:
        number = records = bad = 0
        while True:
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
                long = len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n")
                while long and (rest := handle.readline(_CHUNK_BYTES)):
                    if rest.endswith(b"\n"):
                        break
            except OSError as err:
                raise LedgerError(f"cannot read the ledger {path}: {_reason(err)}") from None
            if not raw:
                break
            number += 1
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a byte-order mark an editor added: not part of the record
            if long:
                bad += 1
                if damaged is not None:
                    damaged.append(Damaged(path, number, f"longer than {MAX_LINE_BYTES} bytes"))
                continue
            if not raw.strip():
                continue
            try:
                record = Record.from_dict(_decode(raw))
            except LedgerVersionError as err:
                raise LedgerVersionError(f"{path} line {number}: {err}") from None
            except ValueError as err:
                # A last line cut short by a kill is a ledger's damage; any other line
                # that is no record (whole, or not even the start of a record's object:
                # a compressed ledger's bytes) says the file may be no ledger at all.
                # (Zeros alone: a power cut during the first write, as some file systems
                # leave it, is a cut record too.)
                begun = raw.lstrip().startswith(b"{") or not raw.strip(b"\x00")
                bad += raw.endswith(b"\n") or not begun
                if damaged is not None:
                    damaged.append(Damaged(path, number, str(err)))
                continue
            records += 1
            yield record, raw
    if bad and not records:
        raise LedgerError(
            f"{path} is not a swarm ledger: none of its {bad} line(s) is a swarm record"
        )


def _decode(raw: bytes) -> object:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    try:
        return json.loads(text)
    # Deeply nested brackets exhaust the parser's recursion, not just its patience.
    except (ValueError, RecursionError):
        raise ValueError("not JSON") from None


def describe_damage(damaged: Sequence[Damaged], limit: int = 3) -> str:
    """One warning line naming the first ``limit`` damaged lines; empty when there are none."""
    if not damaged:
        return ""
    shown: list[str] = []
    previous = None
    for item in damaged[: max(limit, 0)]:
        where = f"line {item.line}" if item.path == previous else f"{item.path} line {item.line}"
        shown.append(f"{where} ({item.reason})")
        previous = item.path
    text = f"{len(damaged)} damaged ledger line(s) skipped"
    if shown:
        text += ": " + ", ".join(shown)
    rest = len(damaged) - len(shown)
    if rest and shown:
        text += f" and {rest} more"
    return text
