"""What the fake EC2 is set to: its accounts and images, its token buckets, latency and faults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..actions import ACTIONS, DESCRIBE_LIMITS
from ..actions.base import Bucket
from ..actions.operations import RESOURCE_OPERATIONS

ACCOUNT = "123456789012"  # moto's default account: the one CREDENTIALS act in
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
INSTANCE_ACTIONS = frozenset(
    {"TerminateInstances", "StopInstances", "StartInstances", "RebootInstances"}
)
# The operations of swarm ec2 that are not instance actions: throttled and counted alike.
RESOURCE_ACTIONS = frozenset(op.api for op in RESOURCE_OPERATIONS.values())
MUTATING = INSTANCE_ACTIONS | RESOURCE_ACTIONS
DESCRIBE = "DescribeInstances"
IMAGE_ID = "ami-12c6146b"  # one of moto's built-in images
INSTANCE_TYPE = "t3.micro"
# Calls carrying this header are the sandbox's own set-up and checks: see the module docstring.
ADMIN_HEADER = "x-swarm-sandbox-admin"
# The role assumed to act in another account; moto lets any ARN be assumed, existing or not.
ROLE_NAME = "swarm"


@dataclass(frozen=True)
class BucketSpec:
    burst: float
    rate: float  # tokens added per second


BucketPair = tuple[BucketSpec, BucketSpec | None]  # an action's call bucket and instance bucket


@dataclass(frozen=True)
class SandboxConfig:
    # TerminateInstances' buckets; every other action's default limits scale with them.
    requests: BucketSpec
    resources: BucketSpec
    latency: float = 0.0
    jitter: float = 0.0
    error_rate: float = 0.0
    # A share of the instance actions' calls throttled at random, whatever the buckets
    # hold and without spending their tokens (an API busy with others' calls).
    throttle_share: float = 0.0
    seed: int = 0
    region: str = "us-east-1"
    # Answer an empty bucket with this status and no body (as some proxies and
    # other services do) instead of EC2's RequestLimitExceeded XML.
    empty_throttle_status: int | None = None
    # API action -> (call bucket, instance bucket or None) for actions other
    # than TerminateInstances; an action left out gets ``derived_limits``.
    limits: Mapping[str, BucketPair] | None = field(default=None, hash=False)
    # Whether DescribeInstances from clients under test spends its own bucket.
    throttle_describe: bool = True
    # Seconds a stopped instance stays "stopping", and a started one "pending", before it
    # is "stopped" or "running" (EC2's take tens of seconds; moto's none). EC2 starts no
    # instance while it is stopping.
    transition_seconds: float = 0.0

    def __post_init__(self) -> None:
        for api, pair in (self.limits or {}).items():
            if api not in THROTTLED:
                raise ValueError(f"no bucket is kept for {api!r}; known: {sorted(THROTTLED)}")
            if api == "TerminateInstances" and pair != (self.requests, self.resources):
                raise ValueError("TerminateInstances' buckets are `requests` and `resources`")

    def with_(self, **changes: Any) -> SandboxConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def derived_limits(self) -> dict[str, BucketPair]:
        """EC2's documented limits for every throttled action, scaled as terminate's are here.

        Bursts and rates scale separately (burst by the ratio of bursts, rate by
        the ratio of rates), call buckets with ``requests`` and instance buckets
        with ``resources``, so that a preset scaled down for a demo keeps EC2's
        proportions between actions, and the documented TerminateInstances
        buckets give every action exactly its documented ones.
        """
        documented = ACTIONS["terminate"].limits
        assert documented.instances is not None  # TerminateInstances has both buckets
        calls = _Ratio.between(self.requests, documented.calls)
        instances = _Ratio.between(self.resources, documented.instances)
        out: dict[str, BucketPair] = {
            spec.api: (
                calls.apply(spec.limits.calls),
                None if spec.limits.instances is None else instances.apply(spec.limits.instances),
            )
            for spec in ACTIONS.values()
        }
        for op in RESOURCE_OPERATIONS.values():
            out[op.api] = (calls.apply(op.calls), None)
        out[DESCRIBE] = (calls.apply(DESCRIBE_LIMITS.calls), None)
        out["TerminateInstances"] = (self.requests, self.resources)
        return out

    def action_limits(self) -> dict[str, BucketPair]:
        """The buckets the front keeps for each API action it throttles."""
        out = self.derived_limits()
        out.update(self.limits or {})
        out["TerminateInstances"] = (self.requests, self.resources)
        if not self.throttle_describe:
            del out[DESCRIBE]
        return out


THROTTLED = MUTATING | {DESCRIBE}


@dataclass(frozen=True)
class _Ratio:
    burst: float
    rate: float

    @staticmethod
    def between(ours: BucketSpec, documented: Bucket) -> _Ratio:
        return _Ratio(ours.burst / documented.burst, ours.rate / documented.rate)

    def apply(self, documented: Bucket) -> BucketSpec:
        # A bucket that can never hold one token would refuse every call for good,
        # which no EC2 limit does; scaling down stops at one.
        return BucketSpec(max(1.0, documented.burst * self.burst), documented.rate * self.rate)


PRESETS: dict[str, SandboxConfig] = {
    # EC2's documented defaults for TerminateInstances (and so for every action).
    "ec2": SandboxConfig(BucketSpec(100, 5), BucketSpec(1000, 20), latency=0.05, jitter=0.02),
    # Scaled down so a demo of a few hundred instances throttles within seconds.
    "quick": SandboxConfig(BucketSpec(20, 50), BucketSpec(200, 150), latency=0.04, jitter=0.01),
}
