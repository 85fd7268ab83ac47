"""A fake EC2 on 127.0.0.1: moto's server behind EC2's token buckets.

moto answers the calls as EC2 does but never throttles. The front added here
gives each throttled API action (the four instance actions and
DescribeInstances) EC2's buckets, one pair per account, region and action (one
token per call, one per instance in the call), answers an empty bucket as EC2
does (HTTP 503, ``RequestLimitExceeded``), adds latency, and injects server
errors at a set rate, all from a fixed random seed. One endpoint serves every
region and account: the region comes from the SigV4 credential scope, the
account from the access key (the default one, or one made by STS AssumeRole on
the same endpoint). Nothing here is used on the real path.

Where moto departs from EC2 on instance states (it stops, starts and reboots a
terminated instance back to life, and reboots a stopped one into running), the
front answers as EC2 does.

It can also play the faults a real endpoint shows, switched at run time from a
test's thread: calls that are never answered (``Sandbox.hang``), throttles with
an empty body (``empty_throttle_status``), and an endpoint that goes away and
comes back on the same port with its state intact (``Sandbox.outage``). It
counts terminations repeated for an instance already terminated through it.

A rehearsal's own ID list (``Sandbox.load_ids``) is launched straight into
moto's backend, and that backend object is given an instance-ID index
(``_InstanceIndex``): moto alone scans every instance it holds per lookup, so
loading took minutes at 10,000 IDs and grew with the square of the count.

The sandbox's own set-up and check calls (``launch``, ``states``, clients from
``Sandbox.client``) carry the ``x-swarm-sandbox-admin`` header: the front lets
them through untouched by buckets, latency, faults, hang mode and counters, so
that checking the sandbox never spends the tokens of the client under test.

One module per job: ``config`` (limits, presets, accounts), ``wire`` (reading
requests, error answers), ``front`` (the token buckets and faults in front of
moto), ``moto_backend`` (the ID index, loading, states read directly),
``server`` (``Sandbox``: up, down, outages), ``admin`` (its own set-up and
check calls), ``extra`` (whether moto is installed).
"""

from .admin import environment, fake_ids
from .config import (
    ACCOUNT,
    ADMIN_HEADER,
    CREDENTIALS,
    DESCRIBE,
    IMAGE_ID,
    INSTANCE_TYPE,
    MUTATING,
    PRESETS,
    ROLE_NAME,
    THROTTLED,
    BucketPair,
    BucketSpec,
    SandboxConfig,
)
from .extra import SANDBOX_EXTRA, missing_extra
from .front import Counters, Ec2Front, PairKey, TokenBucket
from .moto_backend import LOAD_CHUNK, LoadProgress
from .server import Sandbox
from .wire import StartResponse, WsgiApp

__all__ = [
    "ACCOUNT",
    "ADMIN_HEADER",
    "CREDENTIALS",
    "DESCRIBE",
    "IMAGE_ID",
    "INSTANCE_TYPE",
    "LOAD_CHUNK",
    "MUTATING",
    "PRESETS",
    "ROLE_NAME",
    "SANDBOX_EXTRA",
    "THROTTLED",
    "BucketPair",
    "BucketSpec",
    "Counters",
    "Ec2Front",
    "LoadProgress",
    "PairKey",
    "Sandbox",
    "SandboxConfig",
    "StartResponse",
    "TokenBucket",
    "WsgiApp",
    "environment",
    "fake_ids",
    "missing_extra",
]
