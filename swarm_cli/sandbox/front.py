"""The throttling front: WSGI middleware giving moto EC2's token buckets, latency and faults."""

from __future__ import annotations

import http
import io
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from .config import ACCOUNT, MUTATING, RESOURCE_ACTIONS, BucketSpec, SandboxConfig
from .moto_backend import (
    ON_THE_WAY,
    _address_user,
    _image_owner,
    _set_states_in_moto,
    _states_in_moto,
    _unknown_instances,
    _untaggable,
    not_found_message,
)
from .wire import (
    StartResponse,
    WsgiApp,
    _Caller,
    _error_xml,
    _form_owned_by,
    _form_with_ids,
    _instance_ids,
    _resource_ids,
    _set_body,
)


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
    injected: int = 0  # calls answered with an error of fail_action
    repeats: int = 0  # accepted terminations of an instance already accepted before
    # Instances in accepted calls, per API action ("StopInstances": 40).
    accepted_by_action: dict[str, int] = field(default_factory=dict)


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


# The states from which EC2 refuses an action with IncorrectInstanceState, and
# how it says so. moto refuses none of these: it stops and starts a terminated
# instance back to life and reboots a stopped one into running.
_CANNOT = {
    "StopInstances": (
        # EC2 stops no instance still pending ("it has never reached the 'running' state").
        frozenset({"terminated", "shutting-down", "pending"}),
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
        # (API action, ID) -> calls of a resource operation that succeeded on it.
        self._done: dict[tuple[str, str], int] = {}
        # moto's backends are not built for concurrent mutation; one call at a time.
        self._moto = threading.Lock()
        # Instances on their way (stopping, pending): each one's latest move, and the
        # timers that end the moves (see _on_the_way).
        self._transit: dict[tuple[str, str, str], int] = {}
        self._timers: set[threading.Timer] = set()
        # Wall-clock time (time.time(), comparable across processes) at which the
        # first instance-action call of a client under test arrived; None before it.
        self.first_call_at: float | None = None
        # Per API action: the error every call of a client under test gets (fail_action).
        self._failing: dict[str, _Fault] = {}
        # Instance IDs DescribeInstances leaves out of its answers (omit_from_describe).
        self._omitted: frozenset[str] = frozenset()
        # API actions whose calls take effect but are answered 200 with a body that is no
        # answer of EC2's (empty by default).
        self._unreadable: dict[str, bytes] = {}

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

    def unreadable_answers(self, action: str, on: bool = True, body: bytes = b"") -> None:
        """Calls of ``action`` take effect, and their answer is a 200 with ``body``: empty
        (a proxy that cut it off), or a page of a proxy's or a portal's: the client
        cannot tell what happened."""
        with self._lock:
            if on:
                self._unreadable[action] = body
            else:
                self._unreadable.pop(action, None)

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

    def done_by(self, action: str) -> dict[str, int]:
        """ID -> how many calls of ``action`` (a resource operation, e.g. DeleteSnapshot)
        succeeded on it: more than one is a repeat."""
        with self._lock:
            return {i: n for (act, i), n in self._done.items() if act == action}

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
            share = self.config.throttle_share
            if mutating and share and self._rng.random() < share:
                self._throttled(key, mutating)
                return "requests"
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
        if not caller.is_ec2:
            # STS (a role assumed, or renewed inside an EC2 call): only its faults.
            with self._lock:
                fault = self._failing.get(params.get("Action", [""])[0])
                self.counters.injected += fault is not None
            if fault is not None:
                reason = http.HTTPStatus(fault.status).phrase
                return self._error(
                    start_response, f"{fault.status} {reason}", fault.code, fault.message, False
                )
        mutating = action in MUTATING
        ids = _instance_ids(params)
        resources = _resource_ids(params) if action in RESOURCE_ACTIONS else ids
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
                    self.counters.injected += 1
            if fault is not None:
                reason = http.HTTPStatus(fault.status).phrase
                return self._error(
                    start_response, f"{fault.status} {reason}", fault.code, fault.message
                )
            bad_tag = _unwritable_tag(params) if action in TAGGING else None
            if bad_tag is not None:
                # moto would keep it and then answer every Describe of it with XML no
                # parser reads; EC2 limits the characters of tags.
                return self._error(
                    start_response,
                    "400 Bad Request",
                    "InvalidParameterValue",
                    f"Tag {bad_tag} contains characters a tag may not hold",
                )
            if action == "DescribeInstances" and omitted and set(ids) & omitted:
                kept = [i for i in ids if i not in omitted]
                if not kept:
                    return self._no_reservations(start_response)
                body = _form_with_ids(body, kept)
                _set_body(environ, body)
                ids = kept
            owners = [v[0] for k, v in params.items() if k.startswith("Owner.")]
            if action == "DescribeSnapshots" and "self" in owners:
                body = _form_owned_by(body, self._account_of(environ, caller))
                _set_body(environ, body)
            if mutating:
                self.sleep(self._delay())
            if action in self._limits:
                account = self._account_of(environ, caller)
                refusal = self.admit(action, len(resources), account=account, region=caller.region)
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
            # After the bucket, as EC2 charges a refused call too.
            dry_run = params.get("DryRun", ["false"])[0].lower() == "true"
            if action in ("CreateTags", "DeleteTags") and not dry_run:
                account = self._account_of(environ, caller)
                with self._moto:
                    absent = _untaggable(account, caller.region, resources)
                if absent is not None:
                    return self._error(start_response, "400 Bad Request", *absent)
            # moto's answer is kept back until after the hang check, and its
            # status is needed to tell an accepted termination from a refused one.
            started: list[tuple[Any, ...]] = []

            def keep(*args: Any) -> Callable[[bytes], Any]:
                started.append(args)
                return lambda data: None  # moto (Flask) returns its body, never writes

            try:
                answer = list(self._forward(environ, keep, action, params, caller, body))
            except NotImplementedError as exc:
                # moto fails on a filter name it does not know; EC2 refuses one it does
                # not know (and the sandbox cannot apply one moto lacks).
                named = _MOTO_FILTER.search(str(exc))
                if named is None:
                    raise
                return self._error(
                    start_response,
                    "400 Bad Request",
                    "InvalidParameterValue",
                    f"The filter '{named.group(1) or named.group(2)}' is invalid, or one "
                    "the sandbox cannot apply",
                )
            if action == "TerminateInstances" and started and str(started[0][0]).startswith("200"):
                self._record_terminations(ids)
            if action in RESOURCE_ACTIONS and started and str(started[0][0]).startswith("200"):
                with self._lock:
                    for i in resources:
                        self._done[(action, i)] = self._done.get((action, i), 0) + 1
            if not self._hold(mutating, after_effect=True):
                return self._going_away(start_response)
            with self._lock:
                unreadable = self._unreadable.get(action)
            if unreadable is not None:
                size = str(len(unreadable))
                start_response("200 OK", [("Content-Type", "text/xml"), ("Content-Length", size)])
                return [unreadable]
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
        if action == "ReleaseAddress" and not dry_run:
            return self._release(environ, start_response, params, caller)
        if action == "DeregisterImage" and not dry_run:
            # EC2 deregisters only the caller's own AMIs; moto, any it has.
            image = params.get("ImageId", [""])[0]
            account = self._account_of(environ, caller)
            with self._moto:
                owner = _image_owner(account, caller.region, image) if image else None
            if owner is not None and owner != account:
                return self._error(
                    start_response,
                    "401 Unauthorized",
                    "AuthFailure",
                    f"Not authorized for image:{image}",
                )
        if action == "DescribeInstances" and not dry_run and "InstanceId.1" in params:
            # EC2 names every unknown ID of the call; moto, one: a list with many gone
            # would cost a call per ID.
            account = self._account_of(environ, caller)
            with self._moto:
                unknown = _unknown_instances(account, caller.region, _instance_ids(params))
            if unknown:
                return self._error(
                    start_response,
                    "400 Bad Request",
                    "InvalidInstanceID.NotFound",
                    not_found_message(list(dict.fromkeys(unknown))),
                )
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
            answer = list(self.app(environ, start_response))
            if states is not None and action in ON_THE_WAY and self.config.transition_seconds > 0:
                self._on_the_way(account, caller.region, states, action)
            return answer

    def _on_the_way(self, account: str, region: str, before: dict[str, str], action: str) -> None:
        """Instances moto just stopped or started (at once): on their way for a while, as
        EC2's are. Called holding the moto lock."""
        passing, passing_code, end, end_code = ON_THE_WAY[action]
        after = _states_in_moto(account, region, list(before)) or {}
        moved = [i for i, state in after.items() if state == end and before.get(i) != end]
        if not moved:
            return
        _set_states_in_moto(account, region, moved, passing, passing_code)
        # One on its way already (a stop of an instance stopping) keeps the time it had.
        fresh = [i for i in moved if before.get(i) != passing]
        if not fresh:
            return
        marks = {}
        for i in fresh:
            key = (account, region, i)
            marks[i] = self._transit[key] = self._transit.get(key, 0) + 1

        def arrive() -> None:
            with self._moto:
                # Only those no later call has sent on another way since.
                due = [i for i in fresh if self._transit.get((account, region, i)) == marks[i]]
                _set_states_in_moto(account, region, due, end, end_code, only_from=passing)
                self._timers.discard(timer)

        timer = threading.Timer(self.config.transition_seconds, arrive)
        timer.daemon = True
        self._timers.add(timer)
        timer.start()

    def cancel_transitions(self) -> None:
        """The sandbox stops: no instance of it moves on after (moto's state is global)."""
        with self._moto:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()

    def _release(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        params: dict[str, list[str]],
        caller: _Caller,
    ) -> list[bytes]:
        """EC2 refuses to release an associated address; moto releases it."""
        allocation = params.get("AllocationId", [""])[0]
        account = self._account_of(environ, caller)
        with self._moto:
            user = _address_user(account, caller.region, allocation) if allocation else None
            if user is not None:
                return self._error(
                    start_response,
                    "400 Bad Request",
                    "InvalidIPAddress.InUse",
                    f"Address {allocation} is in use (associated with {user}).",
                )
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
    def _error(
        start_response: StartResponse, status: str, code: str, message: str, ec2: bool = True
    ) -> list[bytes]:
        body, request_id = _error_xml(code, message, ec2)
        start_response(
            status,
            [
                ("Content-Type", "text/xml"),
                ("Content-Length", str(len(body))),
                ("x-amzn-RequestId", request_id),
            ],
        )
        return [body]


# moto's unknown filters: "The filter 'x' for DescribeVolumes has not been implemented",
# and for instances "Filter dicts have not been implemented in Moto for 'x' yet".
_MOTO_FILTER = re.compile(
    r"The filter '([^']*)' for \w+ has not been implemented"
    r"|not been implemented in Moto for '([^']*)'"
)


# Calls that set tags, and the parameters that carry them (Tag.1.Key, and
# TagSpecification.1.Tag.1.Value at launch).
TAGGING = frozenset({"CreateTags", "RunInstances", "CreateVolume", "CreateSnapshot"})
_TAG_PARAM = re.compile(r"(?:TagSpecification\.\d+\.)?Tag\.\d+\.(?:Key|Value)")
# What XML 1.0 cannot carry: the control characters other than tab and the line breaks.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _unwritable_tag(params: Mapping[str, list[str]]) -> str | None:
    """The first tag parameter (its name) whose key or value holds a character no
    Describe answer could carry, or None."""
    for name, values in params.items():
        if _TAG_PARAM.fullmatch(name) and any(_NOT_XML.search(v) for v in values):
            return name
    return None
