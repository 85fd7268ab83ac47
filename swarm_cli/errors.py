"""What stops a command, as typed errors: each kind carries its exit code and its message.

Commands raise these; one place (``swarm_cli.cli.exits``) prints the message on stderr
and turns the kind into the process's exit code, as pip's ``base_command`` does. The
codes are the README's (and ``run``'s ``EXIT_*``): 2 bad usage or input, 3 refused by a
guard or at the confirmation, 4 credentials or permission, 74 the ledger could not be
written, 130 interrupted by SIGINT and 128 + N by signal N.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_CREDENTIALS = 4
EXIT_LEDGER = 74  # sysexits.h's EX_IOERR
EXIT_SIGNALLED = 128  # plus the signal's number
EXIT_INTERRUPTED = EXIT_SIGNALLED + signal.SIGINT  # 130


class SwarmError(Exception):
    """A command cannot go on: ``message`` says why in one line, ``exit_code`` how it ends.

    ``details`` are further lines printed as they are under the message (the first bad
    lines of an input, say). ``plain`` prints the message as a line of its own, not as an
    error: for an end the user chose (a confirmation declined, Ctrl-C while setting up).
    """

    exit_code: int = EXIT_FAILED

    def __init__(
        self,
        message: str,
        *,
        details: Sequence[str] = (),
        plain: bool = False,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = tuple(details)
        self.plain = plain
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(SwarmError):
    """Bad usage or input (options, ID lists, files); nothing was sent."""

    exit_code = EXIT_USAGE


class RefusedError(SwarmError):
    """Refused by a guard (a rail) or at the confirmation."""

    exit_code = EXIT_REFUSED


class CredentialsError(SwarmError):
    """No usable credentials, an account out of reach, or permission denied."""

    exit_code = EXIT_CREDENTIALS


class LedgerFailure(SwarmError):
    """The ledger could not be written: it no longer lists every intent."""

    exit_code = EXIT_LEDGER


class Interrupted(SwarmError):
    """Stopped by a signal: exit 128 + its number (130 for SIGINT)."""

    def __init__(
        self,
        message: str,
        *,
        signum: int = signal.SIGINT,
        details: Sequence[str] = (),
        plain: bool = False,
    ) -> None:
        super().__init__(
            message, details=details, plain=plain, exit_code=EXIT_SIGNALLED + int(signum)
        )
        self.signum = int(signum)


_KINDS: dict[int, type[SwarmError]] = {
    EXIT_USAGE: UsageError,
    EXIT_REFUSED: RefusedError,
    EXIT_CREDENTIALS: CredentialsError,
    EXIT_LEDGER: LedgerFailure,
}


def error_for(code: int, message: str) -> SwarmError:
    """The kind of error an exit code names (a check that reports its own code)."""
    kind = _KINDS.get(code)
    if kind is not None:
        return kind(message)
    if code > EXIT_SIGNALLED:
        return Interrupted(message, signum=code - EXIT_SIGNALLED)
    return SwarmError(message, exit_code=code)
