"""What goes wrong with a ledger: the errors, each a one-line message for the user."""

from __future__ import annotations


class LedgerError(Exception):
    """A ledger that cannot be opened, read or written; the message is one line for the user."""


class LedgerWriteError(LedgerError):
    """Writing the ledger failed, so it no longer lists every intent."""


class LedgerVersionError(LedgerError):
    """The ledger was written in a newer format than this swarm reads."""


def _reason(err: OSError) -> str:
    return err.strerror or str(err)
