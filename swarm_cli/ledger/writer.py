"""The append-only JSONL ledger of intents and their outcomes, and folding it back."""

from __future__ import annotations

import contextlib
import enum
import errno
import json
import os
import queue
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any, BinaryIO, Final, TypeVar

FORMAT_VERSION = 1
STATUSES = ("pending", "missing", "failed", "succeeded")
STATUS_RANK = {status: rank for rank, status in enumerate(STATUSES)}
# The code of the extra ``succeeded`` record written when ``--wait`` saw the
# instance reach the action's target state; its ``reached`` field says when.
REACHED_CODE = "Reached"
# The actions whose success is final: a terminated instance never comes back, so
# no later run's record of it (pending, failed) can undo it. For every other
# action (stop, start, reboot) the latest run decides.
FINAL_SUCCESS: frozenset[str] = frozenset({"terminate"})


# Failure codes a retry cannot fix while nothing else changes: the instance is
# protected (by EC2, or by --protect-tag), in a state the action does not apply
# to, or the ID is not an instance ID.
PERMANENT_CODES: frozenset[str] = frozenset(
    {
        "OperationNotPermitted",
        "IncorrectInstanceState",
        "UnsupportedOperation",
        "InvalidInstanceID.Malformed",
        "Protected",
    }
)


def permanent(record: Record) -> bool:
    """A failure that a retry would only repeat (see :data:`PERMANENT_CODES`)."""
    return record.status == "failed" and record.code in PERMANENT_CODES


class LedgerError(Exception):
    """A ledger that cannot be opened, read or written; the message is one line for the user."""


class LedgerWriteError(LedgerError):
    """Writing the ledger failed, so it no longer lists every intent."""


class LedgerVersionError(LedgerError):
    """The ledger was written in a newer format than this swarm reads."""


@dataclass(frozen=True)
class Record:
    ts: str
    run: str
    seq: int
    action: str
    id: str
    status: str
    region: str | None = None
    account: str | None = None
    code: str | None = None
    message: str | None = None
    http_status: int | None = None
    attempts: int = 0
    request_id: str | None = None
    # On the write-ahead records: how many intents their block holds. A block
    # with fewer of them in the ledger was cut short by a kill (see WriteAheadCheck).
    intents: int | None = None
    # On the write-ahead records: the seq of their block's first record, which
    # names the block within its run (a run writes one block per account,
    # region and action). Records of older swarms have none: one block per run.
    block: int | None = None
    # On the write-ahead records, when the run said so: how many intents all
    # its blocks hold, so a kill between two blocks shows too.
    run_intents: int | None = None
    # When --wait saw the instance in the action's target state (ISO 8601).
    reached: str | None = None
    # When the run that wrote this record started (ISO 8601): the same on every
    # record of a run, so that the latest run decides. Older swarms wrote none.
    started: str | None = None
    v: int = FORMAT_VERSION

    def order(self) -> tuple[bool, str, str, int, str, int]:
        """Merge order: the larger record wins (a last-writer-wins register per intent).

        For terminate a success wins over everything (it is final); otherwise,
        and among successes, the latest run wins: runs are ordered by when they
        started, then by run id; within a run, by status rank (succeeded >
        failed > missing > pending), then time and seq. A record of an older
        swarm, which names no start, counts as a run that started when it was
        written. The order is total, so merges commute, associate and are
        idempotent. Only two records with the same run and seq tie, and a
        writer never gives two records the same seq; :func:`fold` still breaks
        such ties by the whole record, so the merge does not depend on input order.
        """
        final = self.status == "succeeded" and self.action in FINAL_SUCCESS
        started = self.started or self.ts
        return (final, started, self.run, STATUS_RANK[self.status], self.ts, self.seq)

    def to_dict(self) -> dict[str, Any]:
        # dataclasses.asdict deep-copies every value; these are all scalars.
        return {name: getattr(self, name) for name in _FIELDS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, data: object) -> Record:
        """Check one decoded line and build its record.

        Raises ``ValueError`` naming what is wrong, or ``LedgerVersionError`` for
        a format newer than this one. Unknown fields are ignored, so a later
        swarm of the same format may add fields.
        """
        if not isinstance(data, dict):
            raise ValueError("not an object")
        version = data.get("v")
        if type(version) is not int:
            raise ValueError("no format version" if version is None else "'v' is not an integer")
        if version > FORMAT_VERSION:
            raise LedgerVersionError(
                f"written by a newer swarm (format {version}; this swarm reads format "
                f"{FORMAT_VERSION}): upgrade swarm to read it"
            )
        if version < 1:
            raise ValueError(f"unknown format version {version}")
        for name, (types, required) in _SCHEMA.items():
            if name not in data:
                if required:
                    raise ValueError(f"no field '{name}'")
            elif type(data[name]) not in types:
                kind = " or ".join(_TYPE_NAMES[t] for t in types)
                raise ValueError(f"'{name}' is not {kind}")
        if data["status"] not in STATUS_RANK:
            raise ValueError(f"unknown status {data['status']!r}")
        return cls(**{name: data[name] for name in _FIELDS if name in data})


_FIELDS = tuple(field.name for field in fields(Record))

_NONE = type(None)
# field -> (the JSON types it may hold, required). Types match exactly, so
# `true` is not taken for a number although bool subclasses int.
_SCHEMA: dict[str, tuple[tuple[type, ...], bool]] = {
    "ts": ((str,), True),
    "run": ((str,), True),
    "seq": ((int,), True),
    "action": ((str,), True),
    "id": ((str,), True),
    "status": ((str,), True),
    "region": ((str, _NONE), False),
    "account": ((str, _NONE), False),
    "code": ((str, _NONE), False),
    "message": ((str, _NONE), False),
    "http_status": ((int, _NONE), False),
    "attempts": ((int,), False),
    "request_id": ((str, _NONE), False),
    "intents": ((int, _NONE), False),
    "block": ((int, _NONE), False),
    "run_intents": ((int, _NONE), False),
    "reached": ((str, _NONE), False),
    "started": ((str, _NONE), False),
}
_TYPE_NAMES = {str: "a string", int: "an integer", _NONE: "null"}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


class WriterValue(enum.Enum):
    """The type of :data:`OWN`."""

    OWN = "own"


# The default of the per-record overrides of LedgerWriter: the writer's own
# value. A sentinel, not None, because None is a value an override may set.
OWN: Final = WriterValue.OWN

_T = TypeVar("_T")


def _own(value: _T | WriterValue, own: _T) -> _T:
    return own if isinstance(value, WriterValue) else value


# Lines are written in blocks of about this size: few system calls, bounded memory.
_CHUNK_BYTES = 1 << 20
# The writer thread takes at most this many records between two writes, so a
# flood of outcomes still reaches the disk (and fsync) in steady steps.
_BATCH_RECORDS = 4096
_STOP = object()


class LedgerWriter:
    """Appends the records of one run to a ledger file.

    A run may cover several accounts, regions and actions: the constructor's
    ``action``, ``region`` and ``account`` are only defaults, and each call of
    :meth:`write_ahead` and :meth:`write` may name its own.

    The intents are written ahead, synchronously, as one ``pending`` record
    each (:meth:`write_ahead`, one block per call); the ledger keeps no run
    header, so every line stands alone and ledgers merge line by line. Write
    every block before the first call is sent: a cut-short block then means
    the run sent nothing, which is what :class:`CutShort` tells the user.

    Outcomes go through :meth:`write`, which only queues: a thread of the
    writer's own appends them, flushes each batch and fsyncs at least every
    ``fsync_interval`` seconds while records come in, and once more at
    :meth:`close`. So a ``kill -9`` loses at most the outcomes of the last
    second, and their intents still read ``pending``.

    When the disk refuses a write, the writer stops writing, keeps the record
    that failed and every later one, reports the error once to ``on_error``
    (from its thread) and hands the kept records back from :meth:`close`.
    """

    def __init__(
        self,
        path: str,
        run: str,
        action: str,
        region: str | None,
        account: str | None = None,
        *,
        on_error: Callable[[OSError], None] | None = None,
        fsync_interval: float = 1.0,
        started: str | None = None,
        seq_after: int = 0,
    ) -> None:
        if fsync_interval < 0:
            raise ValueError("fsync_interval must not be negative")
        self.path = path
        self.run = run
        self.action = action
        self.region = region
        self.account = account
        # On every record: when the run started (now, unless this writer adds to a
        # run begun earlier, as --wait's reached records do).
        self.started = started or utc_now()
        self._on_error = on_error
        self._fsync_interval = fsync_interval
        # O_NOFOLLOW in the call that creates the file: a symbolic link swapped in
        # at the path since it was checked (during the confirmation) is refused, not
        # written through. O_NONBLOCK: a FIFO swapped in must not hang the open.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            self._fd = os.open(path, flags | os.O_CLOEXEC, 0o666)
        except OSError as err:
            raise LedgerError(f"cannot open the ledger {path}: {_reason(err)}") from None
        try:
            os.set_blocking(self._fd, True)
            # Character devices such as /dev/null cannot be synced: nothing there is durable.
            info = os.fstat(self._fd)
            self._syncable = stat.S_ISREG(info.st_mode)
            if self._syncable:
                # The file's name is durable only once its folder is synced.
                _sync_folder(path)
            # A line cut short by an earlier crash must not swallow this run's first record.
            if self._syncable and info.st_size and _last_byte(path) not in (b"\n", None):
                os.write(self._fd, b"\n")
        except OSError as err:
            os.close(self._fd)
            raise LedgerError(f"cannot open the ledger {path}: {_reason(err)}") from None
        # Callers hold the engine's lock while calling write(); this lock only
        # guards the sequence number, so it is held for microseconds.
        self._lock = threading.Lock()
        # The thread's appends and write_ahead() share one file descriptor; a
        # short write must not let another writer's bytes into the middle of a line.
        self._io_lock = threading.Lock()
        # Records get seqs after ``seq_after``: a writer that adds to a run begun
        # by another writer continues its numbering instead of repeating it.
        self._seq = seq_after
        self._closed = False
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._error: OSError | None = None
        self._unsynced: list[Record] = []
        self._lost: list[Record] = []

    @property
    def last_seq(self) -> int:
        """The seq of the last record written or queued; a writer adding to the run starts after."""
        with self._lock:
            return self._seq

    @property
    def error(self) -> OSError | None:
        """The first error that stopped the ledger, or ``None`` while all is well."""
        return self._error

    def write_ahead(
        self,
        ids: Sequence[str],
        *,
        code: str | None = None,
        message: str | None = None,
        region: str | WriterValue | None = OWN,
        account: str | WriterValue | None = OWN,
        action: str | WriterValue = OWN,
        run_intents: int | None = None,
    ) -> None:
        """Record every intent as ``pending`` and make it durable before anything is sent.

        The records form one block: each carries the block's size
        (``intents``) and its first seq (``block``), so a reader can tell a
        block cut short by a kill from a whole one. ``run_intents``, when
        given, is the number of intents of all the run's blocks together,
        which also shows a kill between two blocks; pass the same number to
        every block, and write every block before the first call.

        Raises :class:`LedgerWriteError` if the records cannot be written and
        synced; the run must not start then, since the ledger would miss intents.
        That error is not passed to ``on_error``, but it stops the writer all
        the same: later outcomes are kept for :meth:`close` to return.
        """
        if run_intents is not None and run_intents < len(ids):
            raise ValueError("run_intents is smaller than this block")
        # _io_lock is held from taking the seqs until the block is on disk, so
        # every record with a larger seq reaches the file after the whole
        # block: WriteAheadCheck takes any such record as proof the block is whole.
        with self._io_lock:
            with self._lock:
                if self._closed:
                    raise ValueError("write to a closed ledger")
                first = self._seq + 1
                self._seq += len(ids)
                shape = Record(
                    ts=utc_now(),
                    run=self.run,
                    seq=0,
                    action=_own(action, self.action),
                    id="",
                    status="pending",
                    region=_own(region, self.region),
                    account=_own(account, self.account),
                    code=code,
                    message=message,
                    intents=len(ids),
                    block=first,
                    run_intents=run_intents,
                    started=self.started,
                )
            if not ids:
                return
            if self._error is not None:
                raise self._write_error(self._error)
            try:
                for chunk in _chunks(_pending_lines(shape, ids, first)):
                    self._write_all(chunk)
                self._sync()
            except _ShortWrite as short:
                failure = short.error
            except OSError as err:
                failure = err
            else:
                return
            # Set under _io_lock, so the thread writes no later record after
            # this cut block: the ledger no longer lists every intent.
            self._error = self._error or failure
        raise self._write_error(failure) from failure

    def write(
        self,
        instance_id: str,
        status: str,
        *,
        code: str | None = None,
        message: str | None = None,
        http_status: int | None = None,
        attempts: int = 0,
        request_id: str | None = None,
        reached: str | None = None,
        region: str | WriterValue | None = OWN,
        account: str | WriterValue | None = OWN,
        action: str | WriterValue = OWN,
    ) -> None:
        """Queue one outcome for the writer thread; never waits on the disk.

        When ``--wait`` sees an instance in the action's target state, write
        an extra ``succeeded`` record with code :data:`REACHED_CODE` and
        ``reached`` set to when; it merges like any other record.
        """
        if status not in STATUS_RANK:
            # The reader would skip such a line as damage: the outcome would be lost.
            raise ValueError(f"unknown status {status!r}")
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed ledger")
            self._seq += 1
            record = Record(
                ts=utc_now(),
                run=self.run,
                seq=self._seq,
                action=_own(action, self.action),
                id=instance_id,
                status=status,
                region=_own(region, self.region),
                account=_own(account, self.account),
                code=code,
                message=message,
                http_status=http_status,
                attempts=attempts,
                request_id=request_id,
                reached=reached,
                started=self.started,
            )
            # Queued under the lock, so outcomes reach the file in sequence order.
            self._queue.put(record)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"ledger {self.path}", daemon=True
                )
                self._thread.start()

    def flush(self) -> None:
        """Wait until every record queued so far is written and synced, or known lost."""
        with self._lock:
            thread = self._thread
            if self._closed or thread is None:
                return
            done = threading.Event()
            self._queue.put(done)
        # A thread that died of a bug would never set the event.
        while not done.wait(0.05):
            if not thread.is_alive():
                return

    def close(self) -> list[Record]:
        """Write what is queued, sync, and close; return the records that were not written.

        Never raises for I/O errors: they show in :attr:`error` and in the
        returned list, which callers should report (those outcomes are in no
        ledger). Calling it again returns the same list.
        """
        with self._lock:
            if self._closed:
                return list(self._lost)
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()
            # Only a thread that died of a bug leaves records behind; they were not written.
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, Record):
                    self._lost.append(item)
                elif isinstance(item, threading.Event):
                    item.set()
        try:
            os.close(self._fd)
        except OSError as err:
            self._error = self._error or err
        return list(self._lost)

    # The writer thread.

    def _run(self) -> None:
        last_sync = time.monotonic()
        dirty = False
        while True:
            timeout = None
            if dirty:
                timeout = max(0.0, last_sync + self._fsync_interval - time.monotonic())
            try:
                batch = [self._queue.get(timeout=timeout)]
            except queue.Empty:
                # Records came in and then stopped: sync them without waiting for more.
                self._sync_in_thread()
                last_sync, dirty = time.monotonic(), False
                continue
            while len(batch) < _BATCH_RECORDS:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            records = [item for item in batch if isinstance(item, Record)]
            if records:
                self._append(records)
                dirty = True
            waiters = [item for item in batch if isinstance(item, threading.Event)]
            stop = any(item is _STOP for item in batch)
            if waiters or stop or time.monotonic() - last_sync >= self._fsync_interval:
                self._sync_in_thread()
                last_sync, dirty = time.monotonic(), False
            for waiter in waiters:
                waiter.set()
            if stop:
                return

    def _append(self, records: list[Record]) -> None:
        # Every record is in _unsynced or _lost before anything here can raise,
        # so close() can account for all of them even if on_error raises.
        if self._error is not None:
            self._lost.extend(records)
            return
        try:
            lines = [(record.to_json() + "\n").encode() for record in records]
        except Exception:
            self._lost.extend(records)
            raise
        with self._io_lock:
            # A write-ahead block may have failed while this batch waited for the
            # lock: a record after a cut block would pass for proof it is whole.
            if self._error is not None:
                self._lost.extend(records)
                return
            try:
                self._write_all(b"".join(lines))
            except _ShortWrite as short:
                failure: _ShortWrite | None = short
            else:
                failure = None
        if failure is None:
            self._unsynced.extend(records)
            return
        # Lines wholly before the failure are in the file; a cut line reads as damage.
        end = 0
        for index, line in enumerate(lines):
            end += len(line)
            if end > failure.written:
                self._unsynced.extend(records[:index])
                self._lost.extend(records[index:])
                break
        self._fail(failure.error)

    def _sync_in_thread(self) -> None:
        if self._error is not None:
            return
        with self._io_lock:
            try:
                self._sync()
            except OSError as err:
                failure = err
            else:
                self._unsynced.clear()
                return
        # After a failed fsync the kernel may drop those pages: they are not known written.
        self._lost.extend(self._unsynced)
        self._unsynced.clear()
        self._fail(failure)

    def _fail(self, err: OSError) -> None:
        self._error = err
        if self._on_error is not None:
            self._on_error(err)

    def _write_all(self, data: bytes) -> None:
        """Write all of ``data`` or raise how much got in; callers hold ``_io_lock``."""
        view = memoryview(data)
        done = 0
        while done < len(data):
            try:
                count = os.write(self._fd, view[done:])
            except OSError as err:
                raise _ShortWrite(done, err) from err
            if count == 0:
                raise _ShortWrite(done, OSError(errno.EIO, "the file took no more bytes"))
            done += count

    def _sync(self) -> None:
        if self._syncable:
            os.fsync(self._fd)
            # Synced into a file nobody can open any more: as good as not written.
            if os.fstat(self._fd).st_nlink == 0:
                raise OSError(errno.ENOENT, "the ledger file was deleted during the run")

    def _write_error(self, err: OSError) -> LedgerWriteError:
        return LedgerWriteError(f"cannot write the ledger {self.path}: {_reason(err)}")


def _pending_lines(shape: Record, ids: Sequence[str], first: int) -> Iterator[str]:
    """The lines of a write-ahead block: ``shape`` with each id and its seq from ``first``."""
    # Pending lines differ only in id and seq, so every other field is
    # encoded once: a json.dumps of each whole record would be most of the
    # time 100,000 intents take to write ahead.
    fixed = shape.to_dict()
    names = sorted(fixed)  # the key order of Record.to_json
    at_id, at_seq = names.index("id"), names.index("seq")

    def pairs(keys: list[str]) -> str:
        return "".join(f"{json.dumps(k)}:{json.dumps(fixed[k])}," for k in keys)

    head = "{" + pairs(names[:at_id]) + '"id":'
    middle = "," + pairs(names[at_id + 1 : at_seq]) + '"seq":'
    tail = "," + pairs(names[at_seq + 1 :]).rstrip(",") + "}\n"
    for offset, instance_id in enumerate(ids):
        yield head + json.dumps(instance_id) + middle + str(first + offset) + tail


def _last_byte(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1)
    except OSError:  # unreadable (a write-only file): nothing to mend then
        return None


class _ShortWrite(Exception):
    """A write that failed after ``written`` bytes reached the file."""

    def __init__(self, written: int, error: OSError) -> None:
        super().__init__(written, error)
        self.written = written
        self.error = error


def _chunks(lines: Iterable[str]) -> Iterator[bytes]:
    block: list[str] = []
    size = 0
    for line in lines:
        block.append(line)
        size += len(line)
        if size >= _CHUNK_BYTES:
            yield "".join(block).encode()
            block, size = [], 0
    if block:
        yield "".join(block).encode()


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
                # Only whole lines: a last line cut short by a kill is a ledger's damage.
                bad += raw.endswith(b"\n")
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


def check_ledger_path(path: str, *, ids_path: str | None = None) -> None:
    """Refuse, before anything is sent, a ledger path the run could not append to.

    A symbolic link is refused: appending through it writes wherever it points
    at the time (another run's ledger, a file swapped in since), and the
    ledger is the one record of what was destroyed. The last check opens the
    file for appending and closes it unwritten, because permission bits say
    nothing to root or about a read-only mount; a file that open created is
    removed again, so that a run refused later (or not confirmed) leaves no
    empty ledger behind. Raises :class:`LedgerError` with a one-line message
    saying what to do.
    """
    folder = os.path.dirname(path) or "."
    if not os.path.exists(folder):
        raise LedgerError(f"folder {folder} does not exist: create it or pass --ledger elsewhere")
    if not os.path.isdir(folder):
        raise LedgerError(f"{folder} is not a folder: pass --ledger elsewhere")
    if os.path.islink(path):
        raise LedgerError(f"ledger {path} is a symbolic link: pass the real path")
    exists = os.path.exists(path)
    if exists:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise LedgerError(f"ledger {path} is a folder: pass a file path to --ledger")
        # A device keeps nothing (/dev/null) or refuses all (/dev/full): only a file will do.
        if not stat.S_ISREG(mode):
            raise LedgerError(f"ledger {path} is not a regular file: pass a file path to --ledger")
    if ids_path is not None and ids_path != "-" and same_file(path, ids_path):
        raise LedgerError(f"ledger {path} is the ID list {ids_path}: pass another --ledger")
    if exists and not os.access(path, os.W_OK):
        raise LedgerError(f"ledger {path} is not writable: fix its mode or pass --ledger elsewhere")
    if not exists and not os.access(folder, os.W_OK | os.X_OK):
        raise LedgerError(f"folder {folder} is not writable: pass --ledger elsewhere")
    try:
        # O_NONBLOCK: a FIFO swapped in since the checks must not hang the open.
        fd = os.open(
            path,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o666,
        )
    except OSError as err:
        raise LedgerError(
            f"cannot write the ledger {path}: {_reason(err)}: pass --ledger elsewhere"
        ) from None
    try:
        if not exists:
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
) -> dict[tuple[str, str], Record]:
    """Merge the ledgers of any number of runs or shards, in any order.

    Runs whose write-ahead is incomplete go to ``cut_short``; ledgers that
    hold no record at all (a run killed before its first intent) to ``empty``.
    """
    watch = WriteAheadCheck()
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
) -> int:
    """Write the merged state of ``paths`` to ``out`` as a ledger; return its record count.

    One line per intent: the line of its winning record as read, so every
    field (run, seq, ts, and fields a later swarm of this format added) is
    kept, sorted by (action, instance id). Folding ``out`` gives the state
    folding ``paths`` gives. ``out`` is replaced atomically (a file beside it,
    synced, then renamed over it), so it may be one of ``paths``, and a
    failure leaves it as it was. Runs whose write-ahead is incomplete in
    ``paths`` go to ``cut_short``: the merged ledger may no longer show it,
    since it keeps one record per intent.

    Raises :class:`LedgerError` when an input cannot be read or ``out``
    cannot be written, and :class:`LedgerVersionError` at a record of a newer
    format (dropping it would lose outcomes).
    """
    watch = WriteAheadCheck()
    best: dict[tuple[str, str], tuple[Record, bytes]] = {}
    for path in paths:
        count = 0
        for record, raw in _read_lines(path, damaged):
            count += 1
            watch(record)
            key = (record.action, record.id)
            current = best.get(key)
            if (
                current is None
                or _beats(record, current[0])
                # The same record with other unknown fields: either line, but always the same one.
                or (record == current[0] and raw > current[1])
            ):
                best[key] = (record, raw)
        if not count and empty is not None:
            empty.append(path)
    lines = (best[key][1].rstrip(b"\r\n") + b"\n" for key in sorted(best))
    _replace(out, lines)
    if cut_short is not None:
        cut_short.extend(watch.cut_short())
    return len(best)


def _replace(path: str, lines: Iterable[bytes]) -> None:
    """Make ``path`` hold ``lines``, all or nothing, and durably."""
    folder = os.path.dirname(path) or "."
    base = os.path.basename(path)
    try:
        # A name no other merge picks; O_EXCL never opens someone else's file.
        temp = os.path.join(folder, f".{base}.{secrets.token_hex(8)}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise LedgerError(f"cannot write the ledger {path}: {_reason(err)}") from None
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
        raise LedgerError(f"cannot write the ledger {path}: {_reason(err)}") from None
    # The rename is durable only once the folder is synced.
    try:
        _sync_folder(path)
    except OSError as err:
        raise LedgerError(
            f"wrote the ledger {path} but cannot sync its folder: {_reason(err)}"
        ) from None


def _sync_folder(path: str) -> None:
    """fsync the folder holding ``path``, so that its entry survives a power cut."""
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        count = os.write(fd, view)
        if count == 0:
            raise OSError(errno.EIO, "the file took no more bytes")
        view = view[count:]


@dataclass(frozen=True)
class CutShort:
    """A run killed while writing its intents ahead: none of its calls were sent."""

    run: str
    recorded: int
    intents: int

    def describe(self) -> str:
        return (
            f"run {self.run} was stopped while recording its intents ({self.recorded} of "
            f"{self.intents} recorded) and sent nothing: run it again from its own ID list"
        )


class WriteAheadCheck:
    """Finds, among records streaming past, the runs whose write-ahead was cut short.

    A run writes one block of ``pending`` records per call of
    :meth:`LedgerWriter.write_ahead`, each record carrying the block's first
    seq (``block``) and size (``intents``). A kill leaves a prefix of the
    file, so a cut block lacks its last seq, and no record of its run with a
    larger seq exists (the writer puts those on disk only after the whole
    block). A block is whole when any of these shows: all of its records,
    its last one, or a later record of its run. Asking for more than the
    count is what keeps merged ledgers (one record per intent, so a whole
    block with some intents decided by other runs) from being reported.

    A run that declared ``run_intents`` is also cut short when its blocks
    hold fewer intents than that and nothing of the run follows its last
    block: it was killed between two blocks.

    Records of older swarms carry no ``block``: their run wrote one block,
    taken to start at the smallest seq seen. Records seen twice (the same
    ledger passed twice) count once.
    """

    def __init__(self) -> None:
        # (run, block) -> declared size, and the seqs of it seen.
        self._declared: dict[tuple[str, int | None], int] = {}
        self._seen: dict[tuple[str, int | None], set[int]] = {}
        self._run_intents: dict[str, int] = {}
        self._last_seq: dict[str, int] = {}

    def __call__(self, record: Record) -> Record:
        run = record.run
        if record.seq > self._last_seq.get(run, -1):
            self._last_seq[run] = record.seq
        if record.intents is not None and record.status == "pending":
            key = (run, record.block)
            self._declared[key] = max(record.intents, self._declared.get(key, 0))
            self._seen.setdefault(key, set()).add(record.seq)
            if record.run_intents is not None:
                self._run_intents[run] = max(record.run_intents, self._run_intents.get(run, 0))
        return record

    def cut_short(self) -> list[CutShort]:
        recorded: dict[str, int] = {}
        declared: dict[str, int] = {}
        block_end: dict[str, int] = {}
        cut: set[str] = set()
        for (run, block), size in self._declared.items():
            seen = self._seen[(run, block)]
            last = (min(seen) if block is None else block) + size - 1
            recorded[run] = recorded.get(run, 0) + len(seen)
            declared[run] = declared.get(run, 0) + size
            block_end[run] = max(last, block_end.get(run, last))
            whole = len(seen) >= size or last in seen or self._last_seq[run] > last
            if not whole:
                cut.add(run)
        for run, total in self._run_intents.items():
            if declared[run] < total and self._last_seq[run] <= block_end[run]:
                cut.add(run)
        return [
            CutShort(run, recorded[run], max(declared[run], self._run_intents.get(run, 0)))
            for run in recorded
            if run in cut
        ]


def succeeded_ids(path: str, action: str) -> set[str]:
    """IDs a ledger already holds as done for ``action``: what a resume skips."""
    return {
        record.id
        for (act, _), record in fold(read_records(path)).items()
        if act == action and record.status == "succeeded"
    }
