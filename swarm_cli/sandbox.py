"""A fake EC2 on 127.0.0.1: moto's server behind EC2's token buckets.

moto answers the calls as EC2 does but never throttles. The front added here
gives each mutating action EC2's two buckets (one token per call, one per
instance in the call), answers an empty bucket as EC2 does (HTTP 503,
``RequestLimitExceeded``), adds latency, and injects server errors at a set
rate, all from a fixed random seed. Nothing here is used on the real path.

It can also play the faults a real endpoint shows, switched at run time from a
test's thread: calls that are never answered (``Sandbox.hang``), throttles with
an empty body (``empty_throttle_status``), and an endpoint that goes away and
comes back on the same port with its state intact (``Sandbox.outage``). It
counts terminations repeated for an instance already terminated through it.
"""

from __future__ import annotations

import contextlib
import errno
import http
import io
import logging
import random
import secrets
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import parse_qs

ACCOUNT = "123456789012"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
MUTATING = frozenset({"TerminateInstances", "StopInstances", "StartInstances", "RebootInstances"})
IMAGE_ID = "ami-12c6146b"  # one of moto's built-in images

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


@dataclass(frozen=True)
class BucketSpec:
    burst: float
    rate: float  # tokens added per second


@dataclass(frozen=True)
class SandboxConfig:
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

    def with_(self, **changes: Any) -> SandboxConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


PRESETS: dict[str, SandboxConfig] = {
    # EC2's documented defaults for TerminateInstances.
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
    accepted: int = 0
    throttled: int = 0
    throttled_by_resources: int = 0
    faults: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    instances_accepted: int = 0
    hung: int = 0  # calls held by hang mode
    repeats: int = 0  # accepted terminations of an instance already accepted before


def _error_xml(code: str, message: str) -> tuple[bytes, str]:
    request_id = str(uuid.uuid4())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
        f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
    )
    return body.encode(), request_id


@dataclass(frozen=True)
class _Hang:
    every_call: bool
    after_effect: bool


def _check_status(status: int | None) -> None:
    if status is not None and not 400 <= status <= 599:
        raise ValueError(f"a throttle status must be an HTTP error status, not {status}")


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
        self._buckets: dict[str, tuple[TokenBucket, TokenBucket]] = {}
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

    def hang(
        self, on: bool = True, *, every_call: bool = False, after_effect: bool = False
    ) -> None:
        """Hold calls unanswered while on; turning it off lets held calls go on.

        Only mutating calls are held unless ``every_call``. A call is held
        before it is admitted (it has no effect until released) unless
        ``after_effect``: then moto acts on it and only the answer is withheld,
        the case where a client cannot tell whether its call took effect.
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

    def admit(self, action: str, instances: int) -> str | None:
        """Take the tokens for one call, or say which bucket is empty."""
        now = self.clock()
        with self._lock:
            buckets = self._buckets.get(action)
            if buckets is None:
                buckets = (
                    TokenBucket(self.config.requests, now),
                    TokenBucket(self.config.resources, now),
                )
                self._buckets[action] = buckets
            requests, resources = buckets
            requests.refill(now)
            resources.refill(now)
            if requests.tokens < 1:
                self.counters.throttled += 1
                return "requests"
            if resources.tokens < instances:
                self.counters.throttled += 1
                self.counters.throttled_by_resources += 1
                return "resources"
            requests.tokens -= 1
            resources.tokens -= instances
            if self._rng.random() < self.config.error_rate:
                self.counters.faults += 1
                return "fault"
            self.counters.accepted += 1
            self.counters.instances_accepted += instances
            return None

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
        action = params.get("Action", [""])[0]
        mutating = action in MUTATING
        ids = [v[0] for k, v in params.items() if k.startswith("InstanceId.")]
        with self._lock:
            self.counters.in_flight += 1
            self.counters.peak_in_flight = max(
                self.counters.peak_in_flight, self.counters.in_flight
            )
        try:
            if not self._hold(mutating, after_effect=False):
                return self._going_away(start_response)
            if mutating:
                self.sleep(self._delay())
                refusal = self.admit(action, len(ids))
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

            with self._moto:
                answer = list(self.app(environ, keep))
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

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def counters(self) -> Counters:
        return self._front().counters

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
            self.front = Ec2Front(DomainDispatcherApplication(create_backend_app), self.config)
            self._listen()
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
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

    def client(self) -> Any:
        """A plain boto3 client for setting up and checking the sandbox."""
        import boto3

        return boto3.client(
            "ec2", region_name=self.config.region, endpoint_url=self.endpoint, **CREDENTIALS
        )

    def launch(self, count: int, *, protected: int = 0) -> list[str]:
        """Start ``count`` running instances; the first ``protected`` refuse termination."""
        client = self.client()
        ids: list[str] = []
        while len(ids) < count:
            n = min(500, count - len(ids))
            reply = client.run_instances(
                ImageId=IMAGE_ID, MinCount=n, MaxCount=n, InstanceType="t3.micro"
            )
            ids.extend(i["InstanceId"] for i in reply["Instances"])
        for instance_id in ids[:protected]:
            client.modify_instance_attribute(
                InstanceId=instance_id, DisableApiTermination={"Value": True}
            )
        return ids

    def load_ids(self, ids: list[str]) -> None:
        """Make exactly these IDs exist as running instances (a rehearsal of a real list)."""
        from moto.ec2.models import ec2_backends

        launched = self.launch(len(ids))
        backend = ec2_backends[ACCOUNT][self.config.region]
        by_id = {i.id: i for i in backend.all_instances()}
        for old, new in zip(launched, ids, strict=True):
            by_id[old].id = new

    def states(self, ids: Iterable[str] | None = None) -> dict[str, str]:
        """Instance ID -> state name, as describe_instances reports it."""
        client = self.client()
        wanted = None if ids is None else set(ids)
        out: dict[str, str] = {}
        for page in client.get_paginator("describe_instances").paginate():
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    if wanted is None or inst["InstanceId"] in wanted:
                        out[inst["InstanceId"]] = inst["State"]["Name"]
        return out


def fake_ids(count: int, rng: random.Random | None = None) -> list[str]:
    """IDs of the right shape that no sandbox instance has."""
    make: Callable[[], str] = (
        (lambda: secrets.token_hex(9)[:17])
        if rng is None
        else (lambda: f"{rng.getrandbits(68):017x}")
    )
    return [f"i-{make()}" for _ in range(count)]


def environment(sandbox: Sandbox) -> dict[str, str]:
    """What to export so that the AWS CLI, boto3 and swarm talk to the sandbox."""
    return {
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": sandbox.config.region,
        "AWS_REGION": sandbox.config.region,
        "AWS_ENDPOINT_URL": sandbox.endpoint,
    }
