"""The append-only JSONL ledger of resolved intents, and folding it back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import IO, Any

FORMAT_VERSION = 1
STATUSES = ("pending", "missing", "failed", "succeeded")
STATUS_RANK = {status: rank for rank, status in enumerate(STATUSES)}


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
    v: int = FORMAT_VERSION

    def order(self) -> tuple[int, str, str, int]:
        """Merge order: the larger record wins (a join-semilattice, so merges commute)."""
        return (STATUS_RANK[self.status], self.ts, self.run, self.seq)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        if data.get("status") not in STATUS_RANK:
            raise ValueError(f"unknown status {data.get('status')!r}")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class LedgerWriter:
    """Appends one line per record and flushes it at once.

    A crash loses at most the intents still in flight, which are safe to repeat.
    """

    def __init__(
        self, path: str, run: str, action: str, region: str | None, account: str | None = None
    ) -> None:
        self.path = path
        self.run = run
        self.action = action
        self.region = region
        self.account = account
        self._seq = 0
        self._lock = threading.Lock()
        self._handle: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115

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
    ) -> Record:
        with self._lock:
            self._seq += 1
            record = Record(
                ts=utc_now(),
                run=self.run,
                seq=self._seq,
                action=self.action,
                id=instance_id,
                status=status,
                region=self.region,
                account=self.account,
                code=code,
                message=message,
                http_status=http_status,
                attempts=attempts,
                request_id=request_id,
            )
            self._handle.write(record.to_json() + "\n")
            self._handle.flush()
            return record

    def close(self) -> None:
        with self._lock:
            self._handle.close()


@dataclass(frozen=True)
class Damaged:
    path: str
    line: int
    reason: str


def read_records(path: str, damaged: list[Damaged] | None = None) -> Iterator[Record]:
    """Yield the records of one ledger; lines that do not parse go to ``damaged``.

    A line cut short by a crash is the usual case of damage, and is skipped.
    """
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield Record.from_dict(json.loads(line))
            except (ValueError, TypeError) as err:
                if damaged is not None:
                    damaged.append(Damaged(path, number, str(err)))


def fold(records: Iterable[Record]) -> dict[tuple[str, str], Record]:
    """The state of each (action, instance) intent: the largest of its records."""
    state: dict[tuple[str, str], Record] = {}
    for record in records:
        key = (record.action, record.id)
        current = state.get(key)
        if current is None or record.order() > current.order():
            state[key] = record
    return state


def fold_files(
    paths: Iterable[str], damaged: list[Damaged] | None = None
) -> dict[tuple[str, str], Record]:
    """Merge the ledgers of any number of runs or shards, in any order."""
    return fold(r for path in paths for r in read_records(path, damaged))


def succeeded_ids(path: str, action: str) -> set[str]:
    """IDs a ledger already holds as done for ``action``: what a resume skips."""
    return {
        record.id
        for (act, _), record in fold(read_records(path)).items()
        if act == action and record.status == "succeeded"
    }
