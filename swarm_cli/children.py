"""The processes swarm leaves behind: none.

swarm starts no process of its own; botocore does, for a profile's credential_process.
One that hangs (an SSO helper waiting on a browser, a script that sleeps) outlives the
call that started it, and the run, with whatever it started in turn.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def descendants(root: int | None = None) -> list[int]:
    """The processes under ``root`` (this one by default), children first, where /proc
    lists them (elsewhere: none)."""
    root = os.getpid() if root is None else root
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command's name, in parentheses, may hold spaces: the fields after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parent[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    out: list[int] = []
    level = [root]
    while level:
        level = [pid for pid, ppid in parent.items() if ppid in level and pid not in out]
        out += level
    return out


def end_descendants() -> None:
    """SIGTERM to every process under this one."""
    for pid in descendants():
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue
