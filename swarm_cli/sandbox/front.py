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
"""

from __future__ import annotations

import contextlib
import copy
import errno
import http
import io
import logging
import os
import random
import re
import secrets
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import parse_qs, parse_qsl, urlencode
from xml.sax.saxutils import escape as xml_escape

from ..actions import ACTIONS, DESCRIBE_LIMITS
from ..actions.base import Bucket

ACCOUNT = "123456789012"  # moto's default account: the one CREDENTIALS act in
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
MUTATING = frozenset({"TerminateInstances", "StopInstances", "StartInstances", "RebootInstances"})
DESCRIBE = "DescribeInstances"
IMAGE_ID = "ami-12c6146b"  # one of moto's built-in images
INSTANCE_TYPE = "t3.micro"
# Calls carrying this header are the sandbox's own set-up and checks: see the module docstring.
ADMIN_HEADER = "x-swarm-sandbox-admin"
# The role assumed to act in another account; moto lets any ARN be assumed, existing or not.
ROLE_NAME = "swarm"
# Where moto acts on a call whose region it cannot read (an unsigned request).
_MOTO_DEFAULT_REGION = "us-east-1"
# SigV4: "AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/ec2/aws4_request, ..."
_CREDENTIAL_SCOPE = re.compile(r"Credential=([^/,\s]+)/[^/]+/([^/]+)/([^/]+)/")

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


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


class TokenBucket:
    """Starts full; refills continuously at ``rate`` up to ``burst``."""

    def __init__(self, spec: BucketSpec, now: float) -> None:
        self.spec = spec
        self.tokens = float(spec.burst)
        self._last = now

    def refill(self, now: float) -> None:
        self.tokens = min(self.spec.burst, self.tokens + (now - self._last) * self.spec.rate)
        self._last = now


@dataclass
class Counters:
    """What the front saw of the clients under test, over all accounts and regions.

    The counts are of the instance actions only; DescribeInstances' calls show in
    ``Ec2Front.calls_by`` and ``throttles_by``, which count per (account, region,
    action). Kept JSON-friendly: reports print ``asdict`` of it.
    """

    accepted: int = 0
    throttled: int = 0
    throttled_by_resources: int = 0
    faults: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    instances_accepted: int = 0
    hung: int = 0  # calls held by hang mode
    repeats: int = 0  # accepted terminations of an instance already accepted before
    # Instances in accepted calls, per API action ("StopInstances": 40).
    accepted_by_action: dict[str, int] = field(default_factory=dict)


def _error_xml(code: str, message: str) -> tuple[bytes, str]:
    request_id = str(uuid.uuid4())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{xml_escape(code)}</Code>"
        f"<Message>{xml_escape(message)}</Message>"
        f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
    )
    return body.encode(), request_id


@dataclass(frozen=True)
class _Fault:
    status: int
    code: str
    message: str


@dataclass(frozen=True)
class _Hang:
    every_call: bool
    after_effect: bool


def _check_status(status: int | None) -> None:
    if status is not None and not 400 <= status <= 599:
        raise ValueError(f"a throttle status must be an HTTP error status, not {status}")


PairKey = tuple[str, str, str]  # (account, region, API action)


@dataclass(frozen=True)
class _Caller:
    """Who a request comes from, as far as the front needs it."""

    access_key: str | None
    region: str
    service: str | None  # None: an unsigned request, taken for EC2 as moto takes it
    admin: bool

    @staticmethod
    def of(environ: dict[str, Any]) -> _Caller:
        admin = environ.get("HTTP_" + ADMIN_HEADER.upper().replace("-", "_")) == "1"
        match = _CREDENTIAL_SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if match is None:
            return _Caller(None, _MOTO_DEFAULT_REGION, None, admin)
        return _Caller(match.group(1), match.group(2), match.group(3), admin)

    @property
    def is_ec2(self) -> bool:
        return self.service in (None, "ec2")


def _instance_ids(params: dict[str, list[str]]) -> list[str]:
    return [v[0] for k, v in params.items() if k.startswith("InstanceId.")]


def _form_with_ids(body: bytes, ids: list[str]) -> bytes:
    """The same form request, naming only ``ids``."""
    pairs = [
        (k, v)
        for k, v in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        if not k.startswith("InstanceId.")
    ]
    pairs += [(f"InstanceId.{n}", i) for n, i in enumerate(ids, 1)]
    return urlencode(pairs).encode()


def _set_body(environ: dict[str, Any], body: bytes) -> None:
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))


def _states_in_moto(account: str, region: str, ids: list[str]) -> dict[str, str] | None:
    """Instance ID -> state name in moto's backend, or None if moto should answer alone.

    None when an ID is unknown (moto then refuses the whole call with
    InvalidInstanceID.NotFound, as EC2 does) or the region is not one moto has.
    """
    from moto.ec2.exceptions import InvalidInstanceIdError
    from moto.ec2.models import ec2_backends

    if not ids:
        return None
    try:
        instances = ec2_backends[account][region].get_multi_instances_by_id(ids)
    except (KeyError, InvalidInstanceIdError):
        return None
    return {i.id: str(i.state) for i in instances}


# Instances per moto reservation when loading an ID list: few large RunInstances
# calls, as a fleet is launched, with a progress report after each.
LOAD_CHUNK = 1000
LoadProgress = Callable[[int, int], None]  # (IDs loaded so far, IDs to load)


@dataclass
class _Entry:
    instance: Any  # moto's Instance
    reservation: Any  # the live Reservation holding it
    position: int  # its place in the reservation, for moto's answer order


class _InstanceIndex:
    """Instance ID -> moto instance, for one moto EC2 backend (one account and region).

    moto finds instances by scanning all it holds, once per looked-up ID in
    places (``get_instance``, used by every volume attach and detach) and with
    list membership tests in DescribeInstances by ID: a rehearsal of N IDs costs
    O(N) per ID, minutes at 10,000. Installed on one backend object (never on
    moto's classes), these lookups answer from a dict, and hand any case they
    are not sure of (an unknown or repeated ID) to moto's own method, so errors
    and edge cases stay moto's. moto's reset empties the backend object's
    ``__dict__`` and drops the object, so nothing outlives the sandbox's state.

    moto only ever appends instances to a reservation, so new instances are
    found by indexing the tails of reservations that grew; an index entry
    whose instance has since been renamed is never trusted (its ID is checked).
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._entries: dict[str, _Entry] = {}
        self._indexed: dict[str, int] = {}  # reservation ID -> instances indexed from it

    @staticmethod
    def of(backend: Any) -> _InstanceIndex:
        """The backend's index, installed on first use."""
        index = backend.__dict__.get("_swarm_index")
        if isinstance(index, _InstanceIndex):
            return index
        index = _InstanceIndex(backend)
        index._install()
        return index

    def _install(self) -> None:
        from moto.ec2.utils import filter_reservations

        backend = self.backend
        # Bound before patching: moto's own methods, for every case not answered here.
        get_instance = backend.get_instance
        get_instance_by_id = backend.get_instance_by_id
        get_multi = backend.get_multi_instances_by_id
        get_reservations = backend.get_reservations_by_instance_ids

        def fast_get_instance(instance_id: str) -> Any:
            found = self.find(instance_id)
            return found.instance if found else get_instance(instance_id)

        def fast_get_instance_by_id(instance_id: str) -> Any:
            found = self.find(instance_id)
            return found.instance if found else get_instance_by_id(instance_id)

        def fast_get_multi(instance_ids: list[str], filters: Any = None) -> list[Any]:
            found = self.find_all(instance_ids)
            if found is None:
                return list(get_multi(instance_ids, filters))
            return [e.instance for e in found if e.instance.applies(filters)]

        def fast_get_reservations(instance_ids: list[str], filters: Any = None) -> list[Any]:
            found = self.find_all(instance_ids)
            if found is None or len(set(instance_ids)) != len(instance_ids):
                return list(get_reservations(instance_ids, filters))
            by_reservation: dict[str, list[_Entry]] = {}
            for entry in found:
                by_reservation.setdefault(entry.reservation.id, []).append(entry)
            # moto's answer: copies of the reservations in their order, each
            # holding only the asked-for instances in their order.
            out = []
            for reservation_id, reservation in backend.reservations.items():
                entries = by_reservation.get(reservation_id)
                if entries:
                    shown = copy.copy(reservation)
                    shown.instances = [
                        e.instance for e in sorted(entries, key=lambda e: e.position)
                    ]
                    out.append(shown)
            return out if filters is None else list(filter_reservations(out, filters))

        backend.get_instance = fast_get_instance
        backend.get_instance_by_id = fast_get_instance_by_id
        backend.get_multi_instances_by_id = fast_get_multi
        backend.get_reservations_by_instance_ids = fast_get_reservations
        backend._swarm_index = self

    def _catch_up(self) -> None:
        for reservation in self.backend.reservations.values():
            start = self._indexed.get(reservation.id, 0)
            instances = reservation.instances
            for position in range(start, len(instances)):
                instance = instances[position]
                self._entries[instance.id] = _Entry(instance, reservation, position)
            self._indexed[reservation.id] = len(instances)

    def find(self, instance_id: str) -> _Entry | None:
        """The entry of an instance with this ID now, or None if none is known."""
        entry = self._entries.get(instance_id)
        if entry is None or entry.instance.id != instance_id:
            self._catch_up()
            entry = self._entries.get(instance_id)
        return entry if entry is not None and entry.instance.id == instance_id else None

    def find_all(self, instance_ids: list[str]) -> list[_Entry] | None:
        """Every ID's entry in order, or None if any is unknown here."""
        out = []
        for instance_id in instance_ids:
            entry = self.find(instance_id)
            if entry is None:
                return None
            out.append(entry)
        return out

    def held(self, instance_ids: Iterable[str]) -> dict[str, _Entry]:
        """The entries of those of these IDs that instances have now.

        One catch-up for all of them, where ``find`` would catch up once per
        unknown ID: a load checks every ID it is given before making any.
        """
        self._catch_up()
        out = {}
        for instance_id in instance_ids:
            entry = self._entries.get(instance_id)
            if entry is not None and entry.instance.id == instance_id:
                out[instance_id] = entry
        return out

    def rename(self, instance: Any, new_id: str) -> None:
        """Give a moto instance another ID, keeping it findable under that ID."""
        old = self.find(instance.id)
        assert old is not None and old.instance is instance, "only indexed instances are renamed"
        del self._entries[instance.id]
        instance.id = new_id
        self._entries[new_id] = old


@contextlib.contextmanager
def _quick_launch(backend: Any) -> Iterator[None]:
    """Spare each new instance moto's scans of every image and volume, while loading.

    For each instance it launches, moto looks its image up by filtering all
    ~1,300 known images and tags its root volume after finding it by scanning
    every volume. Both are answered from dicts here, only for the exact calls
    moto makes while launching, and only until the load is done (images could
    be registered later; the wrappers are not left behind).
    """
    describe_images = backend.describe_images
    describe_volumes = backend.describe_volumes
    images: dict[str, list[Any]] = {}

    def images_by_id(*args: Any, **kwargs: Any) -> Any:
        filters = kwargs.get("filters")
        if args or set(kwargs) != {"filters"} or not isinstance(filters, dict):
            return describe_images(*args, **kwargs)
        image_id = filters.get("image-id")
        if set(filters) != {"image-id"} or not isinstance(image_id, str):
            return describe_images(*args, **kwargs)
        if image_id not in images:
            images[image_id] = list(describe_images(**kwargs))
        return list(images[image_id])

    def volumes_by_id(*args: Any, **kwargs: Any) -> Any:
        wanted = kwargs.get("volume_ids")
        if (
            args
            or set(kwargs) != {"volume_ids"}
            or not isinstance(wanted, list)
            or len(wanted) != 1
            or wanted[0] not in backend.volumes
        ):
            return describe_volumes(*args, **kwargs)
        return [backend.volumes[wanted[0]]]

    backend.describe_images = images_by_id
    backend.describe_volumes = volumes_by_id
    try:
        yield
    finally:
        backend.__dict__.pop("describe_images", None)
        backend.__dict__.pop("describe_volumes", None)


def _run_instances(backend: Any, count: int) -> list[Any]:
    """Launch ``count`` running instances in one reservation, as ``launch`` does over HTTP.

    The arguments are those moto's RunInstances handler passes for launch's
    request (image, MinCount=MaxCount=count, instance type); called directly,
    the load skips rendering and parsing an XML answer for every instance.
    """
    reservation = backend.run_instances(
        IMAGE_ID,
        count,
        None,  # user data
        [],  # security group names
        instance_type=INSTANCE_TYPE,
        is_instance_type_default=False,
        placement=None,
        placement_hostid=None,
        region_name=backend.region_name,
        subnet_id=None,
        key_name=None,
        security_group_ids=[],
        nics=[],
        private_ip=None,
        associate_public_ip=None,
        tags={},
        ebs_optimized=False,
        disable_api_stop=False,
        instance_market_options={},
        instance_initiated_shutdown_behavior=None,
        launch_template={},
        hibernation_options={},
        iam_instance_profile_name=None,
        iam_instance_profile_arn=None,
        monitoring_state="disabled",
        ipv6_address_count=None,
        metadata_options={},
        client_token=str(uuid.uuid4()),
    )
    return list(reservation.instances)


# The states from which EC2 refuses an action with IncorrectInstanceState, and
# how it says so. moto refuses none of these: it stops and starts a terminated
# instance back to life and reboots a stopped one into running.
_CANNOT = {
    "StopInstances": (
        frozenset({"terminated", "shutting-down"}),
        "This instance '{}' is not in a state from which it can be stopped.",
    ),
    "StartInstances": (
        frozenset({"terminated", "shutting-down", "stopping"}),
        "The instance '{}' is not in a state from which it can be started.",
    ),
    "RebootInstances": (
        frozenset({"stopped", "stopping"}),
        "The instance '{}' is not in a state from which it can be rebooted.",
    ),
}


class Ec2Front:
    """WSGI middleware: EC2's throttling, latency and faults in front of moto."""

    def __init__(
        self,
        app: WsgiApp,
        config: SandboxConfig,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        _check_status(config.empty_throttle_status)
        self.app = app
        self.config = config
        self.clock = clock
        self.sleep = sleep
        self.counters = Counters()
        self._rng = random.Random(config.seed)
        self._limits = config.action_limits()
        self._buckets: dict[PairKey, tuple[TokenBucket, TokenBucket | None]] = {}
        self._calls: dict[PairKey, int] = {}
        self._throttles: dict[PairKey, int] = {}
        self._lock = threading.Lock()
        # Held calls wait on this; it shares the counters' lock so that the
        # hang switch and the ``hung`` count change together.
        self._hang_changed = threading.Condition(self._lock)
        self._hang: _Hang | None = None
        # Bumped to cut every held call loose without answering it normally
        # (the endpoint is going away), so that stop() never waits on a held call.
        self._release_epoch = 0
        self._empty_throttle_status = config.empty_throttle_status
        self._accepted_ids: set[str] = set()
        # moto's backends are not built for concurrent mutation; one call at a time.
        self._moto = threading.Lock()
        # Wall-clock time (time.time(), comparable across processes) at which the
        # first instance-action call of a client under test arrived; None before it.
        self.first_call_at: float | None = None
        # Per API action: the error every call of a client under test gets (fail_action).
        self._failing: dict[str, _Fault] = {}
        # Instance IDs DescribeInstances leaves out of its answers (omit_from_describe).
        self._omitted: frozenset[str] = frozenset()

    def fail_action(
        self,
        action: str,
        status: int | None = 500,
        code: str = "InternalError",
        message: str = "An internal error has occurred (injected by the sandbox).",
    ) -> None:
        """Answer every call of ``action`` (e.g. ``DescribeInstances``) with this error.

        ``status`` None turns it off. A 403 ``UnauthorizedOperation`` plays a denied
        permission, which moto never answers. Admin calls are never failed.
        """
        if status is not None:
            _check_status(status)
        with self._lock:
            if status is None:
                self._failing.pop(action, None)
            else:
                self._failing[action] = _Fault(status, code, message)

    def omit_from_describe(self, ids: Iterable[str]) -> None:
        """DescribeInstances answers as if these instances were not asked about: no error,
        just absent from the answer (as an eventually consistent read can be)."""
        with self._lock:
            self._omitted = frozenset(ids)

    def hang(
        self, on: bool = True, *, every_call: bool = False, after_effect: bool = False
    ) -> None:
        """Hold calls unanswered while on; turning it off lets held calls go on.

        Only mutating calls are held unless ``every_call``. A call is held
        before it is admitted (it has no effect until released) unless
        ``after_effect``: then moto acts on it and only the answer is withheld,
        the case where a client cannot tell whether its call took effect.
        The sandbox's own (admin) calls are never held.
        """
        with self._hang_changed:
            self._hang = _Hang(every_call, after_effect) if on else None
            self._hang_changed.notify_all()

    def release_hung(self) -> None:
        """Answer every call held now with a 503, whether or not hang mode stays on."""
        with self._hang_changed:
            self._release_epoch += 1
            self._hang_changed.notify_all()

    def set_empty_throttle_status(self, status: int | None) -> None:
        """Answer empty buckets with ``status`` and no body, or as EC2 does if None."""
        _check_status(status)
        with self._lock:
            self._empty_throttle_status = status

    def accepted_ids(self) -> set[str]:
        """Every instance ID whose termination moto has accepted through this front."""
        with self._lock:
            return set(self._accepted_ids)

    def calls_by(
        self, action: str, *, account: str | None = None, region: str | None = None
    ) -> int:
        """Calls of ``action`` admitted by its buckets; None for account or region sums over all."""
        return self._count(self._calls, action, account, region)

    def throttles_by(
        self, action: str, *, account: str | None = None, region: str | None = None
    ) -> int:
        """Calls of ``action`` refused for an empty bucket; None sums over all, as ``calls_by``."""
        return self._count(self._throttles, action, account, region)

    def _count(
        self, counts: dict[PairKey, int], action: str, account: str | None, region: str | None
    ) -> int:
        with self._lock:
            return sum(
                n
                for (a, r, act), n in counts.items()
                if act == action and account in (None, a) and region in (None, r)
            )

    def admit(
        self, action: str, instances: int, *, account: str = ACCOUNT, region: str | None = None
    ) -> str | None:
        """Take the tokens for one call, or say which bucket is empty.

        Buckets are EC2's: one pair per (account, region, action), made full on
        first use. An action with no buckets (not throttled) is always admitted.
        """
        key = (account, region or self.config.region, action)
        now = self.clock()
        with self._lock:
            buckets = self._buckets.get(key)
            if buckets is None:
                pair = self._limits.get(action)
                if pair is None:
                    return None
                calls_spec, instances_spec = pair
                buckets = (
                    TokenBucket(calls_spec, now),
                    None if instances_spec is None else TokenBucket(instances_spec, now),
                )
                self._buckets[key] = buckets
            calls, per_instance = buckets
            mutating = action in MUTATING
            calls.refill(now)
            if per_instance is not None:
                per_instance.refill(now)
            if calls.tokens < 1:
                self._throttled(key, mutating)
                return "requests"
            if per_instance is not None and per_instance.tokens < instances:
                self._throttled(key, mutating)
                if mutating:
                    self.counters.throttled_by_resources += 1
                return "resources"
            calls.tokens -= 1
            if per_instance is not None:
                per_instance.tokens -= instances
            # Only the instance actions fail at random: a fault in the reads
            # that check a run would blur what the run itself went through.
            if mutating and self._rng.random() < self.config.error_rate:
                self.counters.faults += 1
                return "fault"
            self._calls[key] = self._calls.get(key, 0) + 1
            if mutating:
                self.counters.accepted += 1
                self.counters.instances_accepted += instances
                by_action = self.counters.accepted_by_action
                by_action[action] = by_action.get(action, 0) + instances
            return None

    def _throttled(self, key: PairKey, mutating: bool) -> None:
        self._throttles[key] = self._throttles.get(key, 0) + 1
        if mutating:
            self.counters.throttled += 1

    def _account_of(self, environ: dict[str, Any], caller: _Caller) -> str:
        """The account moto acts in for this request, decided as moto decides it.

        (``moto.core.responses.BaseResponse.get_current_account``): so that the
        buckets a call spends are those of the account whose instances it changes.
        """
        if "MOTO_ACCOUNT_ID" in os.environ:
            return os.environ["MOTO_ACCOUNT_ID"]
        header = environ.get("HTTP_X_MOTO_ACCOUNT_ID")
        if header:
            return str(header)
        if caller.access_key is None:
            return ACCOUNT
        from moto.iam.models import get_account_id_from

        # Under moto's lock: STS may be adding a key to the accounts being read.
        with self._moto:
            return str(get_account_id_from(caller.access_key))

    def _delay(self) -> float:
        with self._lock:
            jitter = self._rng.uniform(-self.config.jitter, self.config.jitter)
        return max(0.0, self.config.latency + jitter)

    def _hold(self, mutating: bool, after_effect: bool) -> bool:
        """Wait while hang mode holds this call; False if it was cut loose instead."""
        with self._hang_changed:
            epoch = self._release_epoch
            held = False
            while (
                self._hang is not None
                and self._hang.after_effect == after_effect
                and (mutating or self._hang.every_call)
                and self._release_epoch == epoch
            ):
                if not held:
                    held = True
                    self.counters.hung += 1
                self._hang_changed.wait()
            return self._release_epoch == epoch

    def _record_terminations(self, ids: list[str]) -> None:
        with self._lock:
            for instance_id in dict.fromkeys(ids):
                if instance_id in self._accepted_ids:
                    self.counters.repeats += 1
                else:
                    self._accepted_ids.add(instance_id)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        params = parse_qs(body.decode("utf-8", "replace"))
        caller = _Caller.of(environ)
        action = params.get("Action", [""])[0] if caller.is_ec2 else ""
        if caller.admin:
            return self._forward(environ, start_response, action, params, caller, body)
        mutating = action in MUTATING
        ids = _instance_ids(params)
        arrived = time.time()
        with self._lock:
            if mutating and self.first_call_at is None:
                self.first_call_at = arrived
            self.counters.in_flight += 1
            self.counters.peak_in_flight = max(
                self.counters.peak_in_flight, self.counters.in_flight
            )
        try:
            if not self._hold(mutating, after_effect=False):
                return self._going_away(start_response)
            with self._lock:
                fault, omitted = self._failing.get(action), self._omitted
            if fault is not None:
                reason = http.HTTPStatus(fault.status).phrase
                return self._error(
                    start_response, f"{fault.status} {reason}", fault.code, fault.message
                )
            if action == "DescribeInstances" and omitted and set(ids) & omitted:
                kept = [i for i in ids if i not in omitted]
                if not kept:
                    return self._no_reservations(start_response)
                body = _form_with_ids(body, kept)
                _set_body(environ, body)
                ids = kept
            if mutating:
                self.sleep(self._delay())
            if action in self._limits:
                account = self._account_of(environ, caller)
                refusal = self.admit(action, len(ids), account=account, region=caller.region)
                if refusal == "fault":
                    return self._error(
                        start_response,
                        "500 Internal Server Error",
                        "InternalError",
                        "An internal error has occurred (injected by the sandbox).",
                    )
                if refusal is not None:
                    with self._lock:
                        empty_status = self._empty_throttle_status
                    if empty_status is not None:
                        return self._empty(start_response, empty_status)
                    return self._error(
                        start_response,
                        "503 Service Unavailable",
                        "RequestLimitExceeded",
                        "Request limit exceeded.",
                    )
            # moto's answer is kept back until after the hang check, and its
            # status is needed to tell an accepted termination from a refused one.
            started: list[tuple[Any, ...]] = []

            def keep(*args: Any) -> Callable[[bytes], Any]:
                started.append(args)
                return lambda data: None  # moto (Flask) returns its body, never writes

            answer = list(self._forward(environ, keep, action, params, caller, body))
            if action == "TerminateInstances" and started and str(started[0][0]).startswith("200"):
                self._record_terminations(ids)
            if not self._hold(mutating, after_effect=True):
                return self._going_away(start_response)
            for args in started:
                start_response(*args)
            return answer
        finally:
            with self._lock:
                self.counters.in_flight -= 1

    def _forward(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        action: str,
        params: dict[str, list[str]],
        caller: _Caller,
        body: bytes,
    ) -> list[bytes]:
        """moto's answer, or EC2's where moto's state rules differ from EC2's."""
        rule = _CANNOT.get(action)
        dry_run = params.get("DryRun", ["false"])[0].lower() == "true"
        if rule is None or dry_run:  # EC2 answers DryRun before looking at states
            with self._moto:
                return list(self.app(environ, start_response))
        account = self._account_of(environ, caller)
        ids = _instance_ids(params)
        refused_states, message = rule
        with self._moto:  # the check and moto's act see the same states
            states = _states_in_moto(account, caller.region, ids)
            if states is not None:
                for instance_id in ids:
                    if states[instance_id] in refused_states:
                        return self._error(
                            start_response,
                            "400 Bad Request",
                            "IncorrectInstanceState",
                            message.format(instance_id),
                        )
                if action == "RebootInstances":
                    # EC2 ignores reboots of terminated instances; moto would revive them.
                    live = [i for i in ids if states[i] != "terminated"]
                    if not live:
                        return self._reboot_answer(start_response)
                    if len(live) < len(ids):
                        _set_body(environ, _form_with_ids(body, live))
            return list(self.app(environ, start_response))

    @staticmethod
    def _reboot_answer(start_response: StartResponse) -> list[bytes]:
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<RebootInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId><return>true</return>"
            "</RebootInstancesResponse>"
        ).encode()
        start_response(
            "200 OK",
            [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))],
        )
        return [body]

    @staticmethod
    def _empty(start_response: StartResponse, status: int) -> list[bytes]:
        try:
            line = f"{status} {http.HTTPStatus(status).phrase}"
        except ValueError:  # a status with no standard name is still valid on the wire
            line = f"{status} Error"
        start_response(
            line,
            [("Content-Length", "0"), ("x-amzn-RequestId", str(uuid.uuid4()))],
        )
        return []

    def _going_away(self, start_response: StartResponse) -> list[bytes]:
        return self._error(
            start_response,
            "503 Service Unavailable",
            "ServiceUnavailable",
            "The sandbox is going away.",
        )

    @staticmethod
    def _no_reservations(start_response: StartResponse) -> list[bytes]:
        """A DescribeInstances answer that lists nothing."""
        request_id = str(uuid.uuid4())
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{request_id}</requestId><reservationSet/></DescribeInstancesResponse>"
        ).encode()
        start_response("200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
        return [body]

    @staticmethod
    def _error(start_response: StartResponse, status: str, code: str, message: str) -> list[bytes]:
        body, request_id = _error_xml(code, message)
        start_response(
            status,
            [
                ("Content-Type", "text/xml"),
                ("Content-Length", str(len(body))),
                ("x-amzn-RequestId", request_id),
            ],
        )
        return [body]


class _Server(Protocol):
    port: int

    def serve_forever(self, poll_interval: float = ...) -> None: ...
    def shutdown(self) -> None: ...
    def server_close(self) -> None: ...
    def drop_connections(self) -> None: ...


def _bind(host: str, port: int, patience: float = 5.0) -> socket.socket:
    """A listening socket on ``host:port``, waiting a little for the port to come free.

    Bound here rather than by werkzeug because werkzeug exits the process when a
    port is taken; a restart on the same port must retry instead.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + patience
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)
            return sock
        except OSError as err:
            sock.close()
            if err.errno != errno.EADDRINUSE or port == 0 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _serve(sock: socket.socket, host: str, app: WsgiApp) -> _Server:
    from werkzeug.serving import ThreadedWSGIServer

    class Server(ThreadedWSGIServer):
        """Keeps its open connections, so that going down can cut them.

        Without this, a client's keep-alive connection would go on being served
        by its handler thread after the listening socket is closed.
        """

        def __init__(self) -> None:
            self._connections: set[socket.socket] = set()
            self._connections_lock = threading.Lock()
            super().__init__(host, sock.getsockname()[1], app, fd=sock.fileno())

        def process_request(self, request: Any, client_address: Any) -> None:
            with self._connections_lock:
                self._connections.add(request)
            super().process_request(request, client_address)

        def shutdown_request(self, request: Any) -> None:
            with self._connections_lock:
                self._connections.discard(request)
            super().shutdown_request(request)

        def drop_connections(self) -> None:
            with self._connections_lock:
                connections = list(self._connections)
            for connection in connections:
                with contextlib.suppress(OSError):  # already closed by its handler
                    connection.shutdown(socket.SHUT_RDWR)

    return Server()


@dataclass
class Sandbox:
    """A fake EC2 endpoint, as a context manager.

    moto keeps its state per process, so one process holds one sandbox at a time;
    starting one empties moto's state. An outage (``down``/``up``, ``outage``)
    keeps moto's state, the port and the front with its buckets and counters.
    """

    config: SandboxConfig = field(default_factory=lambda: PRESETS["quick"])
    host: str = "127.0.0.1"
    port: int = 0
    front: Ec2Front | None = field(default=None, init=False)
    _server: _Server | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    # Serialises start, stop, down and up, which may come from different threads.
    _lifecycle: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )
    _stopped: threading.Event = field(
        default_factory=threading.Event, init=False, repr=False, compare=False
    )
    # Account -> credentials from AssumeRole; emptied on start, as moto's reset forgets them.
    _credentials: dict[str, dict[str, str]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _credentials_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def counters(self) -> Counters:
        return self._front().counters

    @property
    def first_call_at(self) -> float | None:
        """When (``time.time()``) the first instance-action call under test arrived, or None."""
        return self._front().first_call_at

    @property
    def is_up(self) -> bool:
        return self._server is not None

    def _front(self) -> Ec2Front:
        assert self.front is not None, "the sandbox is not running"
        return self.front

    def start(self) -> Sandbox:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        with self._lifecycle:
            self._stopped.clear()
            with self._credentials_lock:
                self._credentials.clear()
            self.front = Ec2Front(DomainDispatcherApplication(create_backend_app), self.config)
            self._listen()
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset", method="POST", headers={ADMIN_HEADER: "1"}
        )
        with urllib.request.urlopen(request, timeout=10):
            pass
        return self

    def _listen(self) -> None:
        sock = _bind(self.host, self.port)
        try:
            self._server = _serve(sock, self.host, self._front())
        finally:
            sock.close()  # werkzeug serves a duplicate of it
        self.port = self._server.port
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            # shutdown() waits out one poll; a short one keeps stop() and down() quick.
            kwargs={"poll_interval": 0.05},
            name="swarm-sandbox",
            daemon=True,
        )
        self._thread.start()

    def _go_down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.drop_connections()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        # After the connections are cut no call can start being held, so this
        # frees every held request thread for good.
        if self.front is not None:
            self.front.release_hung()

    def stop(self) -> None:
        self._stopped.set()  # before the lock: ends an outage's wait at once
        with self._lifecycle:
            self._go_down()

    def down(self) -> None:
        """Refuse connections and cut open ones, keeping moto's state and the front."""
        with self._lifecycle:
            self._go_down()

    def up(self) -> None:
        """Listen again on the same port after ``down``."""
        with self._lifecycle:
            if self._stopped.is_set() or self.front is None:
                raise RuntimeError("the sandbox is stopped")
            if self._server is None:
                self._listen()

    def outage(self, seconds: float) -> None:
        """Be down for ``seconds``, then come back; returns early if stopped meanwhile."""
        self.down()
        if self._stopped.wait(seconds):
            return
        with self._lifecycle:
            if not self._stopped.is_set() and self._server is None:
                self._listen()

    def outage_in_background(self, seconds: float, *, after: float = 0.0) -> threading.Thread:
        """Start an outage of ``seconds`` in ``after`` seconds, without waiting for it."""

        def run() -> None:
            if not self._stopped.wait(after):
                self.outage(seconds)

        thread = threading.Thread(target=run, name="swarm-sandbox-outage", daemon=True)
        thread.start()
        return thread

    def hang(
        self, on: bool = True, *, every_call: bool = False, after_effect: bool = False
    ) -> None:
        """Hold calls unanswered while on; see ``Ec2Front.hang``."""
        self._front().hang(on, every_call=every_call, after_effect=after_effect)

    def fail_action(
        self,
        action: str,
        status: int | None = 500,
        code: str = "InternalError",
        message: str = "An internal error has occurred (injected by the sandbox).",
    ) -> None:
        """Answer every call of ``action`` with this error (None: answer normally again)."""
        self._front().fail_action(action, status, code, message)

    def omit_from_describe(self, ids: Iterable[str]) -> None:
        """DescribeInstances leaves these instances out of its answers, without an error."""
        self._front().omit_from_describe(ids)

    def empty_throttles(self, status: int | None) -> None:
        """Answer empty buckets with ``status`` and no body; None restores EC2's answer."""
        self._front().set_empty_throttle_status(status)

    def accepted_ids(self) -> set[str]:
        """Every instance ID whose termination was accepted since the sandbox started."""
        return self._front().accepted_ids()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def calls_by(
        self, action: str, *, region: str | None = None, account: str | None = None
    ) -> int:
        """Calls of ``action`` its buckets admitted; see ``Ec2Front.calls_by``."""
        return self._front().calls_by(action, account=account, region=region)

    def throttles_by(
        self, action: str, *, region: str | None = None, account: str | None = None
    ) -> int:
        """Calls of ``action`` refused for an empty bucket; see ``Ec2Front.throttles_by``."""
        return self._front().throttles_by(action, account=account, region=region)

    def credentials(self, account: str) -> dict[str, str]:
        """boto3 keyword arguments for acting in ``account``.

        The default account's are ``CREDENTIALS``; any other's come from STS
        AssumeRole of ``arn:aws:iam::<account>:role/swarm`` on the sandbox itself
        (moto maps the key it hands out to that account), made once per start.
        """
        if account == ACCOUNT:
            return dict(CREDENTIALS)
        if not re.fullmatch(r"\d{12}", account):
            raise ValueError(f"an AWS account ID is 12 digits, not {account!r}")
        with self._credentials_lock:
            cached = self._credentials.get(account)
            if cached is None:
                sts = self.client(service="sts")
                reply = sts.assume_role(
                    RoleArn=f"arn:aws:iam::{account}:role/{ROLE_NAME}",
                    RoleSessionName="swarm-sandbox",
                )["Credentials"]
                cached = {
                    "aws_access_key_id": reply["AccessKeyId"],
                    "aws_secret_access_key": reply["SecretAccessKey"],
                    "aws_session_token": reply["SessionToken"],
                }
                self._credentials[account] = cached
            return dict(cached)

    def client(
        self,
        region: str | None = None,
        account: str | None = None,
        *,
        admin: bool = True,
        config: Any = None,
        service: str = "ec2",
    ) -> Any:
        """A boto3 client of the sandbox, acting in ``region`` and ``account``.

        By default an admin client, for setting up and checking the sandbox: the
        front lets its calls through unthrottled and uncounted. ``admin=False``
        gives a client like any other, spending the buckets of its (account,
        region) pair; ``config`` is a ``botocore.config.Config`` for it.
        """
        import boto3

        client = boto3.client(
            service,
            region_name=region or self.config.region,
            endpoint_url=self.endpoint,
            config=config,
            **self.credentials(account or ACCOUNT),
        )
        if admin:
            client.meta.events.register("before-sign", _mark_admin)
        return client

    def launch(
        self,
        count: int,
        *,
        protected: int = 0,
        stop_protected: int = 0,
        region: str | None = None,
        account: str | None = None,
    ) -> list[str]:
        """Start ``count`` running instances in ``region`` and ``account``.

        The first ``protected`` refuse termination (DisableApiTermination) and the
        first ``stop_protected`` refuse stopping (DisableApiStop): both set after
        launch, as moto ignores DisableApiTermination given at launch.
        """
        client = self.client(region, account)
        ids: list[str] = []
        while len(ids) < count:
            n = min(500, count - len(ids))
            reply = client.run_instances(
                ImageId=IMAGE_ID, MinCount=n, MaxCount=n, InstanceType=INSTANCE_TYPE
            )
            ids.extend(i["InstanceId"] for i in reply["Instances"])
        for instance_id in ids[:protected]:
            client.modify_instance_attribute(
                InstanceId=instance_id, DisableApiTermination={"Value": True}
            )
        for instance_id in ids[:stop_protected]:
            client.modify_instance_attribute(InstanceId=instance_id, DisableApiStop={"Value": True})
        return ids

    def load_ids(
        self,
        ids: list[str],
        *,
        region: str | None = None,
        account: str | None = None,
        progress: LoadProgress | None = None,
    ) -> None:
        """Make exactly these IDs exist as running instances (a rehearsal of a real list).

        The instances are launched in moto's backend directly, ``LOAD_CHUNK`` to
        a reservation, and given the IDs; ``progress`` hears (loaded, total)
        before the first chunk and after each. An ID listed twice is made once,
        and one the backend already holds is left as it is. The backend keeps
        an ID index (``_InstanceIndex``) so that the calls of the run that
        follows cost the same at 100,000 instances as at 100.
        """
        from moto.ec2.models import ec2_backends

        front = self._front()
        with front._moto:
            backend = ec2_backends[account or ACCOUNT][region or self.config.region]
            index = _InstanceIndex.of(backend)
            unique = list(dict.fromkeys(ids))
            held = index.held(unique)
            todo = [i for i in unique if i not in held]
        total = len(todo)
        if progress is not None:
            progress(0, total)
        for start in range(0, total, LOAD_CHUNK):
            chunk = todo[start : start + LOAD_CHUNK]
            # Lock per chunk, not per load: the endpoint stays answerable meanwhile.
            with front._moto, _quick_launch(backend):
                launched = _run_instances(backend, len(chunk))
                for instance, new_id in zip(launched, chunk, strict=True):
                    index.rename(instance, new_id)
            if progress is not None:
                progress(start + len(chunk), total)

    def held_states(
        self, ids: Iterable[str], *, region: str | None = None, account: str | None = None
    ) -> dict[str, str]:
        """Instance ID -> state name for these IDs, read from moto's backend; unknown IDs left out.

        The names ``states`` gives, without DescribeInstances: rendering and
        parsing every instance as XML takes about 2 ms per instance, 20 s at
        10,000, too long for the check that ends a rehearsal (or cuts one short).
        """
        from moto.ec2.models import ec2_backends

        with self._front()._moto:
            backend = ec2_backends[account or ACCOUNT][region or self.config.region]
            index = _InstanceIndex.of(backend)
            return {i: str(entry.instance.state) for i, entry in index.held(ids).items()}

    def states(
        self,
        ids: Iterable[str] | None = None,
        *,
        region: str | None = None,
        account: str | None = None,
    ) -> dict[str, str]:
        """Instance ID -> state name, as describe_instances reports it (unthrottled)."""
        client = self.client(region, account)
        wanted = None if ids is None else set(ids)
        out: dict[str, str] = {}
        for page in client.get_paginator("describe_instances").paginate():
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    if wanted is None or inst["InstanceId"] in wanted:
                        out[inst["InstanceId"]] = inst["State"]["Name"]
        return out


def _mark_admin(request: Any, **_: Any) -> None:
    """botocore ``before-sign`` handler: mark a request as the sandbox's own."""
    request.headers[ADMIN_HEADER] = "1"


def fake_ids(count: int, rng: random.Random | None = None) -> list[str]:
    """IDs of the right shape that no sandbox instance has."""
    make: Callable[[], str] = (
        (lambda: secrets.token_hex(9)[:17])
        if rng is None
        else (lambda: f"{rng.getrandbits(68):017x}")
    )
    return [f"i-{make()}" for _ in range(count)]


def environment(
    sandbox: Sandbox, *, region: str | None = None, account: str | None = None
) -> dict[str, str]:
    """What to export so that the AWS CLI, boto3 and swarm talk to the sandbox."""
    region = region or sandbox.config.region
    credentials = sandbox.credentials(account or ACCOUNT)
    out = {
        "AWS_ACCESS_KEY_ID": credentials["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": credentials["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ENDPOINT_URL": sandbox.endpoint,
    }
    if "aws_session_token" in credentials:
        out["AWS_SESSION_TOKEN"] = credentials["aws_session_token"]
    return out


SANDBOX_EXTRA = (
    "pip install '.[sandbox]' in a checkout of swarm (or 'swarm-cli[sandbox] @ git+URL@TAG')"
)


def missing_extra() -> str | None:
    """What to install for the fake EC2 (a test server production installs need not carry)."""
    import importlib.util

    absent = [
        name
        for name in ("moto", "flask", "flask_cors", "werkzeug")
        if importlib.util.find_spec(name) is None
    ]
    if not absent:
        return None
    return f"the fake EC2 needs {', '.join(absent)}, which this install lacks: {SANDBOX_EXTRA}"
