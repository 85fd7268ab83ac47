"""The append-only JSONL ledger of intents and their outcomes, and folding it back.

One module per job: ``record`` (the record and its JSON form), ``writer`` (the
write-ahead blocks and the writer thread), ``reader`` (reading and checking
lines), ``blocks`` (write-ahead blocks cut short), ``merge`` (fold and merge),
``paths`` (checking a ledger's path), ``lock`` (one run per ledger), ``errors``.
"""

from .blocks import CutShort, WriteAheadCheck
from .errors import LedgerError, LedgerVersionError, LedgerWriteError
from .lock import LedgerInUse, hold_ledger, in_use
from .merge import fold, fold_files, merge_files, succeeded_ids, undone
from .paths import check_ledger_path, same_file
from .reader import MAX_LINE_BYTES, Damaged, describe_damage, open_ledger, read_records
from .record import (
    ALREADY_CODE,
    FINAL_SUCCESS,
    FORMAT_VERSION,
    IGNORED_CODE,
    IN_TRANSITION_CODE,
    MAYBE_DONE,
    NOT_CHECKED_CODE,
    PERMANENT_CODES,
    REACHED_CODE,
    STATUS_RANK,
    STATUSES,
    WAS_ALREADY_CODE,
    Record,
    may_have_acted,
    permanent,
    undo_note,
    undoes,
    utc_now,
)
from .writer import OWN, LedgerWriter, WriterValue

__all__ = [
    "ALREADY_CODE",
    "FINAL_SUCCESS",
    "FORMAT_VERSION",
    "IGNORED_CODE",
    "IN_TRANSITION_CODE",
    "MAX_LINE_BYTES",
    "MAYBE_DONE",
    "NOT_CHECKED_CODE",
    "OWN",
    "PERMANENT_CODES",
    "REACHED_CODE",
    "STATUSES",
    "STATUS_RANK",
    "WAS_ALREADY_CODE",
    "CutShort",
    "Damaged",
    "LedgerError",
    "LedgerInUse",
    "LedgerVersionError",
    "LedgerWriteError",
    "LedgerWriter",
    "Record",
    "WriteAheadCheck",
    "WriterValue",
    "check_ledger_path",
    "describe_damage",
    "fold",
    "fold_files",
    "hold_ledger",
    "in_use",
    "may_have_acted",
    "merge_files",
    "open_ledger",
    "permanent",
    "read_records",
    "same_file",
    "succeeded_ids",
    "undo_note",
    "undoes",
    "undone",
    "utc_now",
]
