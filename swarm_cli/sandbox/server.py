"""The server: the front on a local port, brought up, down and back on the same port."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .admin import SandboxAdmin
from .config import ADMIN_HEADER, PRESETS, SandboxConfig
from .front import Counters, Ec2Front
from .wire import WsgiApp


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
class Sandbox(SandboxAdmin):
    """A fake EC2 endpoint, as a context manager.

    moto keeps its state per process, so one process holds one sandbox at a time;
    starting one empties moto's state. An outage (``down``/``up``, ``outage``)
    keeps moto's state, the port and the front with its buckets and counters.
    Its own set-up and check calls (``client``, ``launch``, ``load_ids``,
    ``states``) are :class:`~swarm_cli.sandbox.admin.SandboxAdmin`'s.
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
            if self.front is not None:
                self.front.cancel_transitions()

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

    def unreadable_answers(self, action: str, on: bool = True, body: bytes = b"") -> None:
        """Calls of ``action`` take effect but are answered 200 with ``body`` (empty by
        default), which is no answer of EC2's."""
        self._front().unreadable_answers(action, on, body)

    def omit_from_describe(self, ids: Iterable[str]) -> None:
        """DescribeInstances leaves these instances out of its answers, without an error."""
        self._front().omit_from_describe(ids)

    def empty_throttles(self, status: int | None) -> None:
        """Answer empty buckets with ``status`` and no body; None restores EC2's answer."""
        self._front().set_empty_throttle_status(status)

    def done_by(self, action: str) -> dict[str, int]:
        """ID -> calls of a resource operation that succeeded on it; see ``Ec2Front.done_by``."""
        return self._front().done_by(action)

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
