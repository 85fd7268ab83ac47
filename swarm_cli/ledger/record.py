"""One ledger record: its fields, its merge order, its JSON form and the checks on reading it."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from json.encoder import encode_basestring_ascii
from typing import Any

from .errors import LedgerVersionError

# The newest format this swarm reads. Records are written in format 1, but for those that
# carry ``waits`` (format 2): a swarm of format 1 would ignore the field, and read a
# success that no wait checked as done; it refuses such a ledger instead.
FORMAT_VERSION = 2
PLAIN_VERSION = 1
WAITS_VERSION = 2
STATUSES = ("pending", "missing", "failed", "succeeded")
STATUS_RANK = {status: rank for rank, status in enumerate(STATUSES)}
# The code of the extra ``succeeded`` record written when ``--wait`` saw the
# instance reach the action's target state; its ``reached`` field says when.
REACHED_CODE = "Reached"
# The actions whose success is final: a terminated instance never comes back, so
# no later run's record of it (pending, failed) can undo it. For every other
# action (stop, start, reboot) the latest run decides.
FINAL_SUCCESS: frozenset[str] = frozenset(
    {"terminate", "delete-snapshot", "delete-volume", "deregister-image", "release-address"}
)


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
        # A resource in use (swarm ec2): a retry fails again until it is let go.
        "InvalidSnapshot.InUse",
        "VolumeInUse",
        "InvalidIPAddress.InUse",
        # A resource holding EC2's 50 tags already: a retry fails until some are removed.
        "TagLimitExceeded",
        # An instance a --wait saw in a state it cannot leave for the target (terminated,
        # while the wait was for stopped).
        "WrongState",
        # An intent of a stopped run that a resume's selection no longer holds: a resume
        # by selection leaves it be, and a retry by ID would act on what it left out.
        "NotSelected",
        # A resource of another account (a public AMI): recorded failed only when EC2's
        # message named it; a failure of the credentials leaves every intent pending.
        "AuthFailure",
        # An instance EC2 answers with success and leaves as it is (a reboot of a
        # terminated one): not sent, so that no success says it was done.
        "Ignored",
    }
)


# A success whose answer says the instance was in the target state before the call
# (EC2's PreviousState): the call changed nothing, and a rollback has nothing to undo.
WAS_ALREADY_CODE = "WasAlready"
# A record of --wait that says it could not check whether the instance got there.
NOT_CHECKED_CODE = "NotChecked"
# A success recorded without a call: --resume found the instance in the action's end
# state already (see swarm_cli.resume).
ALREADY_CODE = "AlreadyInState"
# An instance in a state where EC2 answers the action with success and does nothing (a
# reboot of a terminated instance): looked up before the run, recorded failed, not sent.
IGNORED_CODE = "Ignored"
# A refusal (IncorrectInstanceState) of an instance only on its way to a state the action
# applies to (a start of one still stopping): a failure, not one for good.
IN_TRANSITION_CODE = "InTransition"


# How a pending record ends when a call of the intent left and no answer said what came
# of it (in flight when the run stopped, or never answered).
MAYBE_DONE = "may or may not be done"


# On the intents of a run that undoes others (a rollback): "undo of run ID[, ID...]".
UNDO_OF = "undo of run "


def undo_note(runs: Sequence[str]) -> str | None:
    """The message on the intents of a run that undoes ``runs``; None for any other run."""
    return UNDO_OF + ", ".join(runs) if runs else None


def undoes(record: Record) -> list[str]:
    """The runs a run undoes, as its intent ``record`` says (none for any other run)."""
    note = record.message or ""
    if record.status != "pending" or record.code is not None or not note.startswith(UNDO_OF):
        return []
    return [r.strip() for r in note[len(UNDO_OF) :].split(",") if r.strip()]


def may_have_acted(last: Record) -> bool:
    """Whether a run whose latest record of an intent is ``last`` may have acted on it:
    that record is the bare intent (the run was killed: its call may have been in
    flight), or pending with a call that no answer settled (MAYBE_DONE). Not when the
    API answered (missing, failed), nor when every call of it was refused or none left
    before the run stopped."""
    return last.status == "pending" and (
        last.code is None or (last.message or "").endswith(MAYBE_DONE)
    )


def permanent(record: Record) -> bool:
    """A failure that a retry would only repeat (see :data:`PERMANENT_CODES`)."""
    return record.status == "failed" and record.code in PERMANENT_CODES


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
    # On every record of a tag run (create-tags, delete-tags): the tags it sets or
    # removes (tags_text), so that a run with other tags never reads as its own.
    tags: str | None = None
    # On every record of a run that was to --wait (stop --wait, start --wait): the state
    # it waits for. A success of such a run that no record of its wait follows (the run
    # was killed before its wait ended) is not known done: see ``unchecked``.
    waits: str | None = None
    v: int = PLAIN_VERSION

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
        """The record's line (without its newline): compact JSON, keys sorted."""
        return json_line([getattr(self, name) for name in _FIELDS])

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
# Each field's place in the record (Record's own order), in the sorted order of a line,
# with the key as the line spells it: a record is written far more often than read.
_SORTED = sorted(range(len(_FIELDS)), key=_FIELDS.__getitem__)
_KEYS = [("," if k else "{") + json.dumps(_FIELDS[i]) + ":" for k, i in enumerate(_SORTED)]


def _json_value(value: Any) -> str:
    """``json.dumps(value)``, faster for the values a record holds."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)  # what json.dumps uses for a str
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)  # what json.dumps uses for an int
    return json.dumps(value)


def json_line(values: Sequence[object]) -> str:
    """The line of a record whose fields hold ``values`` (in Record's order): the same text
    as ``json.dumps`` of its dict with sorted keys and compact separators."""
    return (
        "".join([key + _json_value(values[i]) for key, i in zip(_KEYS, _SORTED, strict=True)]) + "}"
    )


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
    "tags": ((str, _NONE), False),
    "waits": ((str, _NONE), False),
}
_TYPE_NAMES = {str: "a string", int: "an integer", _NONE: "null"}


# (a whole second since the epoch, how it reads): formatted once a second, not per record.
_second: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the microsecond: ``2026-01-31T12:00:00.123456Z``."""
    global _second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _second
    if cached[0] != seconds:
        cached = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        _second = cached  # one assignment: a thread reads the old pair or the new one
    return f"{cached[1]}.{micros:06d}Z"
