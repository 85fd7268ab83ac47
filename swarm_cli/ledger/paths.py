"""Where a ledger goes: the checks on its path before a run, and making its name durable."""

from __future__ import annotations

import contextlib
import os
import stat

from .errors import LedgerError, LedgerVersionError, _reason
from .lock import try_lock


def check_ledger_path(path: str, *, ids_path: str | None = None, fix: str | None = None) -> None:
    """Refuse, before anything is sent, a ledger path the run could not append to.

    A symbolic link is refused: appending through it writes wherever it points
    at the time (another run's ledger, a file swapped in since), and the
    ledger is the one record of what was destroyed. The last check opens the
    file for appending and closes it unwritten, because permission bits say
    nothing to root or about a read-only mount; a file that open created is
    removed again, so that a run refused later (or not confirmed) leaves no
    empty ledger behind. Raises :class:`LedgerError` with a one-line message
    saying what to do (``fix``, when given, says it instead: a rollback appends to the
    ledger it was given, which no --ledger names).
    """
    if path == "-":
        # Not standard output: a ledger is read back (--resume, ledger failed).
        raise LedgerError("a ledger is a file swarm reads back: pass --ledger FILE, not -")
    if not path.strip():
        raise LedgerError("the ledger path is empty: pass --ledger FILE")
    folder = os.path.dirname(path) or "."
    if not os.path.exists(folder):
        raise LedgerError(
            f"folder {folder} does not exist: {fix or 'create it or pass --ledger elsewhere'}"
        )
    if not os.path.isdir(folder):
        raise LedgerError(f"{folder} is not a folder: {fix or 'pass --ledger elsewhere'}")
    if os.path.islink(path):
        raise LedgerError(f"ledger {path} is a symbolic link: pass the real path")
    exists = os.path.exists(path)
    if exists:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise LedgerError(f"ledger {path} is a folder: {fix or 'pass a file path to --ledger'}")
        # A device keeps nothing (/dev/null) or refuses all (/dev/full): only a file will do.
        if not stat.S_ISREG(mode):
            raise LedgerError(
                f"ledger {path} is not a regular file: {fix or 'pass a file path to --ledger'}"
            )
    if ids_path is not None and ids_path != "-" and same_file(path, ids_path):
        raise LedgerError(f"ledger {path} is the ID list {ids_path}: pass another --ledger")
    if exists and os.stat(path).st_size:
        from .reader import read_records  # the reader writes nothing: imported here

        # A file of something else (notes, a compressed ledger) would get records
        # appended to it: refused, as --resume refuses to read it.
        try:
            next(read_records(path), None)
        except LedgerVersionError:
            raise  # it says which swarm wrote it
        except LedgerError as exc:
            # Not the fix of a path that cannot be written: this one cannot be read as a ledger.
            hint = "" if fix else ": pass --ledger elsewhere"
            raise LedgerError(f"{exc}; nothing was sent{hint}") from None
    if exists and not os.access(path, os.W_OK):
        raise LedgerError(
            f"ledger {path} is not writable: {fix or 'fix its mode or pass --ledger elsewhere'}"
        )
    if not exists and not os.access(folder, os.W_OK | os.X_OK):
        raise LedgerError(f"folder {folder} is not writable: {fix or 'pass --ledger elsewhere'}")
    try:
        # O_NONBLOCK: a FIFO swapped in since the checks must not hang the open.
        fd = os.open(
            path,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o666,
        )
    except OSError as err:
        raise LedgerError(
            f"cannot write the ledger {path}: {_reason(err)}: {fix or 'pass --ledger elsewhere'}"
        ) from None
    try:
        # Removed under a lock of its own: a run that opened and holds it meanwhile
        # (ledger.lock) keeps it.
        if not exists and try_lock(fd):
            _remove_if_empty(path, os.fstat(fd))
    finally:
        os.close(fd)


def _remove_if_empty(path: str, made: os.stat_result) -> None:
    """Remove ``path`` if it is still the empty file ``made`` describes (ours, unwritten)."""
    with contextlib.suppress(OSError):
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino) and now.st_size == 0:
            os.unlink(path)


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        # One of them does not exist (yet): compare where the names lead.
        return os.path.realpath(a) == os.path.realpath(b)


def _sync_folder(path: str) -> None:
    """fsync the folder holding ``path``, so that its entry survives a power cut."""
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
