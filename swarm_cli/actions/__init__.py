"""The instance actions swarm runs. Adding one: a file with its ActionSpec and a line here."""

from __future__ import annotations

from .base import ActionSpec, Bucket, Limits
from .reboot import REBOOT
from .start import START
from .stop import STOP
from .terminate import TERMINATE

ACTIONS: dict[str, ActionSpec] = {a.name: a for a in (TERMINATE, STOP, START, REBOOT)}
# DescribeInstances (for --wait and plans), which has a bucket of its own.
DESCRIBE_LIMITS = Limits(calls=Bucket(100, 20))

__all__ = ["ACTIONS", "DESCRIBE_LIMITS", "ActionSpec", "Bucket", "Limits"]
