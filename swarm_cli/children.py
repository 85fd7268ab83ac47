"""The processes swarm leaves behind: none of its own.

swarm starts no process itself; botocore does, for a profile's credential_process. One
that hangs (an SSO helper waiting on a browser, a script that sleeps) outlives the call
that started it, and the run, with whatever it started in turn. The ``swarm`` command
has every process started in it tracked (``track``), and ends those still running, with
what they started, when it ends (``end_started``). Nothing else is touched: a shell that
``exec``s swarm leaves its own background jobs to it, and they are no helper's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

_started: list[subprocess.Popen[Any]] = []
_lock = threading.Lock()


class _Tracked(subprocess.Popen):  # type: ignore[type-arg]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with _lock:
            _started[:] = [p for p in _started if p.returncode is None]
            _started.append(self)


def track() -> None:
    """Every process started from now on is tracked: call it before botocore is imported
    (its credential providers take ``subprocess.Popen`` as they are defined)."""
    subprocess.Popen = _Tracked  # type: ignore[misc]


def end_started() -> None:
    """SIGTERM to each tracked process still running, and to every process under it."""
    with _lock:
        alive = [p.pid for p in _started if p.poll() is None]
    if not alive:
        return
    doomed = [pid for root in alive for pid in (root, *descendants(root))]
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue


def descendants(root: int) -> list[int]:
    """The processes under ``root``, children first, where /proc lists them (elsewhere:
    none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command's name, in parentheses, may hold spaces: the fields after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    out: list[int] = []
    level = [root]
    while level:
        level = [pid for parent in level for pid in children.get(parent, ())]
        out += level
    return out
