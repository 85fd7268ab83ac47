"""The ``swarm`` command's first step: nothing imported yet but what Python has.

The command line (typer, rich, swarm's own modules, botocore) takes a few tenths of a
second to import. Ctrl-C then, or a runner's SIGINT on a step it cancels as soon as it
began, ends it as Ctrl-C does later before anything is sent: exit 130, one line (and with
``--output json`` the one object), not a traceback and 1. A SIGTERM then (a pod deleted
as it starts) does the same with 143, where Python's own default would end it at once
with not a word.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


class _Terminated(BaseException):
    """SIGTERM while the command line is imported (nothing of it handles one yet)."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def main() -> None:
    from .children import end_started, track

    track()
    try:
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            from .cli import main as run
        finally:
            signal.signal(signal.SIGTERM, previous)
        # Typer builds the command before the command line's own handling begins: a
        # KeyboardInterrupt that comes out of it came before anything was read.
        run()
    except (KeyboardInterrupt, _Terminated) as stopped:
        import json

        # The meanings are those of ``cli.exits`` (not imported yet).
        name, code, meaning = (
            ("SIGTERM", 143, "stopped by SIGTERM")
            if isinstance(stopped, _Terminated)
            else ("SIGINT", 130, "interrupted (SIGINT)")
        )
        message = f"interrupted by {name} while starting: nothing was read or sent"
        if _wants_json(sys.argv[1:]):
            found = {"exit_code": code, "meaning": meaning, "error": message}
            sys.stdout.write(json.dumps(found, indent=2) + "\n")
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(code) from None
    finally:
        # A credential_process that hangs (botocore waits on it in a call of the run)
        # would outlive the run, with what it started in turn.
        end_started()


def _wants_json(argv: list[str]) -> bool:
    """As the command line reads --output json (``cli.exits``, not imported yet)."""
    pairs = zip(argv, [*argv[1:], ""], strict=True)
    return any(
        a in ("--output=json", "-ojson") or (a in ("--output", "-o") and b == "json")
        for a, b in pairs
    )
