"""A fake EC2 on 127.0.0.1: moto's server behind EC2's token buckets.

moto answers the calls as EC2 does but never throttles. The front added here
gives each mutating action EC2's two buckets (one token per call, one per
instance in the call), answers an empty bucket as EC2 does (HTTP 503,
``RequestLimitExceeded``), adds latency, and injects server errors at a set
rate, all from a fixed random seed. Nothing here is used on the real path.
"""

from __future__ import annotations

import io
import logging
import random
import secrets
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any
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


def _error_xml(code: str, message: str) -> tuple[bytes, str]:
    request_id = str(uuid.uuid4())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
        f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
    )
    return body.encode(), request_id


class Ec2Front:
    """WSGI middleware: EC2's throttling, latency and faults in front of moto."""

    def __init__(
        self,
        app: WsgiApp,
        config: SandboxConfig,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.app = app
        self.config = config
        self.clock = clock
        self.sleep = sleep
        self.counters = Counters()
        self._rng = random.Random(config.seed)
        self._buckets: dict[str, tuple[TokenBucket, TokenBucket]] = {}
        self._lock = threading.Lock()
        # moto's backends are not built for concurrent mutation; one call at a time.
        self._moto = threading.Lock()

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

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        params = parse_qs(body.decode("utf-8", "replace"))
        action = params.get("Action", [""])[0]
        with self._lock:
            self.counters.in_flight += 1
            self.counters.peak_in_flight = max(
                self.counters.peak_in_flight, self.counters.in_flight
            )
        try:
            if action in MUTATING:
                self.sleep(self._delay())
                ids = sum(1 for key in params if key.startswith("InstanceId."))
                refusal = self.admit(action, ids)
                if refusal == "fault":
                    return self._error(
                        start_response,
                        "500 Internal Server Error",
                        "InternalError",
                        "An internal error has occurred (injected by the sandbox).",
                    )
                if refusal is not None:
                    return self._error(
                        start_response,
                        "503 Service Unavailable",
                        "RequestLimitExceeded",
                        "Request limit exceeded.",
                    )
            with self._moto:
                return list(self.app(environ, start_response))
        finally:
            with self._lock:
                self.counters.in_flight -= 1

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


@dataclass
class Sandbox:
    """A fake EC2 endpoint, as a context manager.

    moto keeps its state per process, so one process holds one sandbox at a time;
    starting one empties moto's state.
    """

    config: SandboxConfig = field(default_factory=lambda: PRESETS["quick"])
    host: str = "127.0.0.1"
    port: int = 0
    front: Ec2Front | None = field(default=None, init=False)
    _server: Any = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def counters(self) -> Counters:
        assert self.front is not None, "the sandbox is not running"
        return self.front.counters

    def start(self) -> Sandbox:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.front = Ec2Front(DomainDispatcherApplication(create_backend_app), self.config)
        self._server = make_server(self.host, self.port, self.front, threaded=True)
        self.port = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="swarm-sandbox", daemon=True
        )
        self._thread.start()
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

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
