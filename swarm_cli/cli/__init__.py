"""The ``swarm`` command line: one module per command group, sharing ``common``; how every
command ends (its exit code, its error on stderr) is decided in ``exits``."""

from __future__ import annotations

import copy
import gc
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer
    from typer.models import CommandInfo

# Importing the commands makes tens of thousands of objects (typer, rich, swarm's own
# modules; boto3 and botocore come when a command acts, with main() keeping the collector
# off), next to none of them garbage: the collector's passes over them would cost the
# first call part of its start. Paused for the imports only; main() keeps it off (see there).
_collecting = gc.isenabled()
gc.disable()
try:
    from . import act, ec2ops, helptext, ledger, sandbox, shards
    from .common import app
finally:
    if _collecting:
        gc.enable()

__all__ = ["app", "main"]
_COMMANDS = (act, ec2ops, ledger, sandbox, shards)  # imported for their commands
helptext.apply(app)  # summaries, examples and argument names, once all are registered


def main() -> None:
    # Nothing made while starting up (modules, botocore's models, the ID list) is ever
    # garbage: collecting it over and over costs the first call a sixth of a second. A run
    # turns collection back on as it starts (run.run), with all that frozen.
    gc.disable()
    command_app(sys.argv[1:])()


def command_app(argv: list[str]) -> typer.Typer:
    """The app with only the command ``argv`` names (``terminate``, ``ec2 delete-snapshot``),
    else the whole app.

    Typer builds every command's options before it parses anything, a tenth of a second
    for all of swarm's; a run needs only its own. The whole app for anything else: no
    command, an option first (--help, --version), a name that is not a command (its error
    lists them), shell completion.
    """
    if any(k.endswith("_COMPLETE") for k in os.environ):
        return app
    return _only(app, argv) or app


def _only(group: typer.Typer, argv: list[str]) -> typer.Typer | None:
    """A copy of ``group`` holding only what ``argv`` names; None if it names nothing."""
    if not argv or argv[0].startswith("-"):
        return None
    name = argv[0]
    commands = [c for c in group.registered_commands if _name(c) == name]
    groups = []
    for info in group.registered_groups:
        if info.name == name:
            inner = _only(info.typer_instance, argv[1:]) if info.typer_instance else None
            if inner is not None:
                info = copy.copy(info)
                info.typer_instance = inner
            groups.append(info)
    if not commands and not groups:
        return None
    only = copy.copy(group)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def _name(command: CommandInfo) -> str | None:
    if command.name:
        return command.name
    return command.callback.__name__.replace("_", "-") if command.callback else None
