"""Writing a run's records: the write-ahead blocks, the writer thread, opening the file safely."""

from __future__ import annotations

import enum
import errno
import json
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, Final, TypeVar

from .errors import LedgerError, LedgerWriteError, _reason
from .lock import RUN_PATIENCE, LedgerInUse, held, try_lock
from .paths import _sync_folder
from .record import (
    PLAIN_VERSION,
    STATUS_RANK,
    WAITS_VERSION,
    Record,
    json_line,
    utc_now,
)


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
# After a write the thread lets outcomes gather this long (unless a flush or the close
# hurries it): one wake-up per few calls rather than per outcome, each wake-up costing
# more CPU than the line. Far below the sync interval, so nothing is kept longer unsynced.
_GATHER_S = 0.02
# Why a run stops when its ledger's path no longer names the file it writes.
MOVED = (
    "the ledger file was moved or replaced during the run: its path no longer names the "
    "file this run writes"
)
_STOP = object()
# An outcome on its way to the file: its record's fields, in Record's order. Built and
# written without a Record (a frozen dataclass of 19 fields costs more than the line);
# a Record is made only of those that end up not written.
_Values = tuple[Any, ...]


def _records(values: Iterable[_Values]) -> list[Record]:
    return [Record(*fields) for fields in values]


def _outcome_line(values: _Values) -> str:
    """``Record(*values).to_json()``, without the Record: one format for the fields an
    outcome has (the write-ahead ones are null), the generic encoding for anything else."""
    ts, run, seq, action, instance_id, status, region, account = values[:8]
    code, message, http_status, attempts, request_id = values[8:13]
    intents, block, run_intents, reached, started, tags, waits, version = values[13:]
    if (
        type(seq) is not int
        or type(attempts) is not int
        or not (http_status is None or type(http_status) is int)
        or not (intents is None and block is None and run_intents is None and tags is None)
        or type(version) is not int
        or version not in (PLAIN_VERSION, WAITS_VERSION)
    ):
        return json_line(values)
    e = encode_basestring_ascii  # json.dumps of a str; written out below, no call per field
    try:
        return (
            f'{{"account":{"null" if account is None else e(account)},"action":{e(action)},'
            f'"attempts":{attempts},"block":null,"code":{"null" if code is None else e(code)},'
            f'"http_status":{"null" if http_status is None else http_status},'
            f'"id":{e(instance_id)},"intents":null,'
            f'"message":{"null" if message is None else e(message)},'
            f'"reached":{"null" if reached is None else e(reached)},'
            f'"region":{"null" if region is None else e(region)},'
            f'"request_id":{"null" if request_id is None else e(request_id)},'
            f'"run":{e(run)},"run_intents":null,"seq":{seq},'
            f'"started":{"null" if started is None else e(started)},"status":{e(status)},'
            f'"tags":null,"ts":{e(ts)},"v":{version},'
            f'"waits":{"null" if waits is None else e(waits)}}}'
        )
    except TypeError:  # a field that is not a string where one is expected
        return json_line(values)


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
        tags: str | None = None,
        waits: str | None = None,
    ) -> None:
        if fsync_interval < 0:
            raise ValueError("fsync_interval must not be negative")
        self.path = path
        self.run = run
        self.action = action
        self.region = region
        self.account = account
        # On every record of a tag run: its tags (so a merged ledger keeps them too).
        self.tags = tags
        # On every record of a run that was to --wait: the state it waits for.
        self.waits = waits
        self._version = PLAIN_VERSION if waits is None else WAITS_VERSION
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
            # One run per ledger: held by this process for the command (lock.hold), or
            # taken here for this writer alone.
            if self._syncable and not (held(self._fd) or try_lock(self._fd, RUN_PATIENCE)):
                os.close(self._fd)
                raise LedgerInUse(path)
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
        self._hurry = threading.Event()  # a flush or the close waits: no gathering
        self._error: OSError | None = None
        self._unsynced: list[_Values] = []
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
                    tags=self.tags,
                    waits=self.waits,
                    v=self._version,
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
            # Record's fields in its order (intents, block and run_intents: write-ahead only).
            values: _Values = (
                utc_now(),
                self.run,
                self._seq,
                self.action if action is OWN else action,
                instance_id,
                status,
                self.region if region is OWN else region,
                self.account if account is OWN else account,
                code,
                message,
                http_status,
                attempts,
                request_id,
                None,
                None,
                None,
                reached,
                self.started,
                self.tags,
                self.waits,
                self._version,
            )
            # Queued under the lock, so outcomes reach the file in sequence order.
            self._queue.put(values)
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
            self._hurry.set()
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
            self._hurry.set()
            thread.join()
            # Only a thread that died of a bug leaves records behind; they were not written.
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if type(item) is tuple:
                    self._lost.extend(_records([item]))
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
            records = [item for item in batch if type(item) is tuple]
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
            if records and not waiters:
                self._hurry.wait(_GATHER_S)
            # Cleared before the next get: whatever came with a flush is taken then.
            self._hurry.clear()

    def _append(self, records: list[_Values]) -> None:
        # Every record is in _unsynced or _lost before anything here can raise,
        # so close() can account for all of them even if on_error raises.
        if self._error is not None:
            self._lost.extend(_records(records))
            return
        try:
            # ASCII only (JSON escapes the rest): a line's length is its length in bytes.
            lines = [_outcome_line(values) + "\n" for values in records]
            data = "".join(lines).encode("ascii")
        except Exception:
            self._lost.extend(_records(records))
            raise
        with self._io_lock:
            # A write-ahead block may have failed while this batch waited for the
            # lock: a record after a cut block would pass for proof it is whole.
            if self._error is not None:
                self._lost.extend(_records(records))
                return
            try:
                self._write_all(data)
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
                self._lost.extend(_records(records[index:]))
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
        self._lost.extend(_records(self._unsynced))
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
            mine = os.fstat(self._fd)
            # Synced into a file nobody can open any more: as good as not written.
            if mine.st_nlink == 0:
                raise OSError(errno.ENOENT, "the ledger file was deleted during the run")
            # Moved away (or another file put in its place): the path no longer holds
            # this run's records, nor its lock, and a second run could start on it.
            try:
                there = os.stat(self.path)
            except (FileNotFoundError, NotADirectoryError):  # its folder replaced by a file
                there = None
            except OSError:
                return  # the folder cannot be read now (its mode changed): nothing to tell
            if there is None or (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
                raise OSError(errno.ENOENT, MOVED)

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
        encoded = (
            encode_basestring_ascii(instance_id)
            if type(instance_id) is str
            else json.dumps(instance_id)
        )
        yield head + encoded + middle + str(first + offset) + tail


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
