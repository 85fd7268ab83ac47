"""One run per ledger: a run holds its ledger, for the whole command, with ``flock``.

Two runs appending to one ledger would both send its intents (a job started twice, two
pods of one shard on one volume), and a rollback or a merge over a ledger a run is
still writing would read half of it. The lock is the kernel's: a kill releases it.

A process holds a ledger once (:func:`hold_ledger`); its own writers then open the file
without asking again (``flock`` locks belong to one open of the file, so a second
open of it in the same process would be refused as another run is).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Iterator

from .errors import LedgerError, _reason

# A run taking its ledger waits this long for it: what only asks whether a run holds it
# (in_use: a merge, a ledger read, a check that the folder is writable) takes the lock
# for an instant, and a run starting then must not be refused as if another held it.
RUN_PATIENCE = 0.5
PATIENCE_STEP = 0.02

# (device, inode) of each ledger this process holds.
_HELD: set[tuple[int, int]] = set()
_GUARD = threading.Lock()


class LedgerInUse(LedgerError):
    """Another process holds the ledger."""

    def __init__(self, path: str, why: str | None = None) -> None:
        super().__init__(
            f"the ledger {path} is in use by another swarm run: "
            + (
                why
                or "two runs on one ledger would both send its intents; give each its own "
                "--ledger, or wait for that run to end"
            )
        )


def held(fd: int) -> bool:
    """Whether this process holds the file open at ``fd`` (by :func:`hold_ledger`)."""
    info = os.fstat(fd)
    with _GUARD:
        return (info.st_dev, info.st_ino) in _HELD


def try_lock(fd: int, patience: float = 0.0, *, shared: bool = False) -> bool:
    """Lock the file open at ``fd`` for this open of it; False when another holds it
    still after ``patience`` seconds. ``shared``: a lock that only an exclusive one (a
    run's) refuses, which a descriptor open for reading may take everywhere (over NFS,
    where flock is a byte-range lock, an exclusive one needs it open for writing).

    Where locks are not kept (some network file systems, platforms without flock),
    it is taken as locked: the run goes on as it did before locks."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        return True
    give_up = time.monotonic() + patience
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= give_up:
                return False
            time.sleep(PATIENCE_STEP)
        except OSError:
            return True
        else:
            return True


@contextlib.contextmanager
def _opened(path: str) -> Iterator[int | None]:
    """``path`` opened to ask about its lock (None if it cannot be); closed after, and a
    lock taken on it goes with it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def held_here(path: str) -> bool:
    """Whether this process holds the ledger at ``path`` (:func:`hold_ledger`)."""
    with _opened(path) as fd:
        return fd is not None and held(fd)


def in_use(path: str) -> bool:
    """Whether another process holds the ledger at ``path`` (a run writing it now)."""
    with _opened(path) as fd:
        return fd is not None and not held(fd) and not try_lock(fd, shared=True)


@contextlib.contextmanager
def hold_ledger(path: str, why: str | None = None) -> Iterator[None]:
    """Hold the ledger at ``path`` while the block runs, creating it if need be; raise
    :class:`LedgerInUse` (saying ``why`` it must wait) if another process holds it. A
    file this made and nothing wrote to is removed again before the lock goes (a run
    refused or not confirmed leaves no empty ledger, and no other run can have opened it
    meanwhile)."""
    # Open for writing where it may be (over NFS an exclusive lock needs it), else for
    # reading: a merge may replace a file it may not write.
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_CREAT
    for _ in range(5):
        made = not os.path.lexists(path)
        try:
            try:
                fd = os.open(path, flags | os.O_RDWR, 0o666)
            except OSError as err:
                if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise
                fd = os.open(path, flags | os.O_RDONLY, 0o666)
        except OSError as err:
            raise LedgerError(f"cannot write the ledger {path}: {_reason(err)}") from None
        if not try_lock(fd, RUN_PATIENCE):
            os.close(fd)
            raise LedgerInUse(path, why)
        info = os.fstat(fd)
        try:
            now = os.stat(path, follow_symlinks=False)
        except OSError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
            break
        os.close(fd)  # removed or replaced between the open and the lock: again
    else:
        raise LedgerError(f"cannot hold the ledger {path}: it keeps being replaced")
    key = (info.st_dev, info.st_ino)
    with _GUARD:
        _HELD.add(key)
    try:
        yield
    finally:
        with _GUARD:
            _HELD.discard(key)
        with contextlib.suppress(OSError):
            mine = os.fstat(fd)
            there = os.stat(path, follow_symlinks=False)
            same = (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)
            if made and same and mine.st_size == 0:
                os.unlink(path)
        os.close(fd)
