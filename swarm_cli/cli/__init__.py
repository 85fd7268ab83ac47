"""The ``swarm`` command line: one module per command group, sharing ``common``; how every
command ends (its exit code, its error on stderr) is decided in ``exits``."""

from __future__ import annotations

import gc

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
    app()
