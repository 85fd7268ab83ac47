"""The ``swarm`` command's first step: nothing imported yet but what Python has.

The command line (typer, rich, swarm's own modules) takes a few hundredths of a second
to import. Ctrl-C then, or a runner's SIGINT on a step it cancels as soon as it began,
ends it as Ctrl-C does later before anything is sent: exit 130, one line (and with
``--output json`` the one object), not a traceback and 1.
"""

from __future__ import annotations

import sys


def main() -> None:
    from .children import end_started, track

    track()
    try:
        from .cli import main as run

        # Typer builds the command before the command line's own handling begins: a
        # KeyboardInterrupt that comes out of it came before anything was read.
        run()
    except KeyboardInterrupt:
        import json

        message = "interrupted by SIGINT while starting: nothing was read or sent"
        if _wants_json(sys.argv[1:]):
            found = {"exit_code": 130, "meaning": "interrupted (SIGINT)", "error": message}
            sys.stdout.write(json.dumps(found, indent=2) + "\n")
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(130) from None
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
