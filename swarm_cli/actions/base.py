"""What an instance action is: its API call, what its answers mean, and EC2's limits for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Bucket:
    """One of EC2's token buckets for an API action: ``burst`` tokens, ``rate`` per second."""

    burst: float
    rate: float


@dataclass(frozen=True)
class Limits:
    """EC2's documented default buckets for one API action (accounts can raise them)."""

    calls: Bucket
    instances: Bucket | None = None  # None: the action has no instance bucket
    per_call: int = 1000  # EC2 takes up to 1000 instance IDs per call


@dataclass(frozen=True)
class ActionSpec:
    """One instance action, as data: adding an action is one such object and a registry line."""

    name: str  # the command: "stop"
    api: str  # EC2's API action: "StopInstances"
    method: str  # boto3's method: "stop_instances"
    verb: str  # for people: "stopped"
    limits: Limits
    # The answer's list of instances ("StoppingInstances"); None when it lists none.
    result_key: str | None = None
    # The state each instance should reach ("stopped"); None when there is none to wait for.
    target_state: str | None = None
    # Error codes that mean the instance is in a state this action cannot apply to.
    wrong_state_codes: frozenset[str] = frozenset({"IncorrectInstanceState"})
    # The action that undoes this one (stop <-> start); None when nothing can.
    undo: str | None = None
    # Extra request parameters a user may set (e.g. Force, Hibernate for stop).
    flags: Mapping[str, str] = field(default_factory=dict)
    # What it acts on, for people: "instance", "snapshot".
    resource: str = "instance"

    @property
    def reversible(self) -> bool:
        return self.undo is not None
