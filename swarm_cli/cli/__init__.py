"""The ``swarm`` command line: one module per command group, sharing ``common``."""

from __future__ import annotations

from . import act, ledger, sandbox, shards
from .common import app

__all__ = ["app", "main"]
_COMMANDS = (act, ledger, sandbox, shards)  # imported for their commands


def main() -> None:
    app()
