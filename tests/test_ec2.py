"""Classification of botocore's answers; the calls themselves are tested against the sandbox."""

from __future__ import annotations

import random
import socket
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import botocore.exceptions as bce
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from swarm_cli.ec2 import (
    BOTOCORE_THROTTLE_CODES,
    BOTOCORE_THROTTLE_STATUSES,
    THROTTLE_CODES,
    THROTTLE_STATUSES,
    HttpError,
    Terminate,
    classify_error,
    classify_exception,
    make_client,
    redact_url,
    scrub,
    split_batch,
    unknown_regions,
)
from swarm_cli.outcome import Kind, Outcome


def client_error(code: str, status: int, message: str = "m") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "r"},
        },
        "TerminateInstances",
    )


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("RequestLimitExceeded", 503, Kind.THROTTLED),
        ("Throttling", 400, Kind.THROTTLED),
        ("PriorRequestNotComplete", 400, Kind.THROTTLED),  # botocore's list, not ours
        ("SomethingNew", 429, Kind.THROTTLED),
        ("Unavailable", 503, Kind.THROTTLED),
        ("503", 503, Kind.THROTTLED),  # botocore's code for an empty 503
        ("InternalError", 500, Kind.TRANSIENT),
        ("InsufficientInstanceCapacity", 500, Kind.TRANSIENT),
        ("502", 502, Kind.TRANSIENT),
        ("InvalidInstanceID.NotFound", 400, Kind.MISSING),
        ("InvalidInstanceID.Malformed", 400, Kind.PERMANENT),
        ("OperationNotPermitted", 400, Kind.PERMANENT),
        ("IncorrectInstanceState", 400, Kind.PERMANENT),
        ("AuthFailure", 401, Kind.FATAL),
        ("UnauthorizedOperation", 403, Kind.FATAL),
        ("PendingVerification", 401, Kind.FATAL),
        ("DryRunOperation", 412, Kind.SUCCEEDED),
    ],
)
def test_error_codes_map_to_outcomes(code: str, status: int, kind: Kind) -> None:
    outcome = classify_error(client_error(code, status))
    assert outcome.kind is kind
    assert (outcome.code, outcome.http_status, outcome.request_id) == (code, status, "r")
    # A 5xx that is no throttle may have come after EC2 acted, unless it says there was
    # no capacity to act; nothing else says so.
    assert outcome.maybe_acted == (kind is Kind.TRANSIENT and not code.startswith("Insufficient"))
    assert outcome.endpoint_error == outcome.maybe_acted


def test_throttle_lists_come_from_botocore() -> None:
    # Private names in botocore: if a release moves them, this fails instead of the
    # classification silently falling back to our shorter list.
    assert "RequestLimitExceeded" in BOTOCORE_THROTTLE_CODES
    assert "PriorRequestNotComplete" in THROTTLE_CODES
    assert 429 in BOTOCORE_THROTTLE_STATUSES
    assert {429, 503} <= THROTTLE_STATUSES


SSO_LOGIN = "aws sso login"


@pytest.mark.parametrize(
    ("err", "kind", "hint"),
    [
        (bce.UnauthorizedSSOTokenError(), Kind.FATAL, SSO_LOGIN),
        (bce.SSOTokenLoadError(error_msg="no token"), Kind.FATAL, SSO_LOGIN),
        (bce.TokenRetrievalError(provider="sso", error_msg="expired"), Kind.FATAL, SSO_LOGIN),
        (bce.CredentialRetrievalError(provider="p", error_msg="m"), Kind.FATAL, "credential"),
        (bce.NoCredentialsError(), Kind.FATAL, "AWS_ACCESS_KEY_ID"),
        (bce.PartialCredentialsError(provider="env", cred_var="k"), Kind.FATAL, "secret"),
        (bce.NoRegionError(), Kind.FATAL, "--region"),
        (bce.ProfileNotFound(profile="nope"), Kind.FATAL, "--profile"),
        (bce.ParamValidationError(report="bad"), Kind.PERMANENT, "bad"),
        (bce.EndpointConnectionError(endpoint_url="x"), Kind.UNREACHABLE, "x"),
        (bce.ConnectTimeoutError(endpoint_url="x"), Kind.UNREACHABLE, "x"),
        (bce.ReadTimeoutError(endpoint_url="x"), Kind.UNREACHABLE, "x"),
        (bce.ConnectionClosedError(endpoint_url="x"), Kind.UNREACHABLE, "x"),
        (bce.ProxyConnectionError(proxy_url="x", error="e"), Kind.UNREACHABLE, "x"),
        (bce.ConnectionError(error="e"), Kind.UNREACHABLE, "e"),
        (bce.HTTPClientError(error="e"), Kind.UNREACHABLE, "e"),
        (ResponseParserError("not XML"), Kind.TRANSIENT, "not XML"),
        (bce.DataNotFoundError(data_path="d"), Kind.TRANSIENT, "d"),
        (HttpError(429, "r", "empty body"), Kind.THROTTLED, "429"),
        (HttpError(503, "r", "empty body"), Kind.THROTTLED, "503"),
        (HttpError(502, "r", "empty body"), Kind.TRANSIENT, "502"),
        (HttpError(401, "r", "empty body"), Kind.FATAL, "401"),
        (HttpError(403, "r", "empty body"), Kind.FATAL, "403"),
        (HttpError(404, "r", "empty body"), Kind.PERMANENT, "404"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else None,
)
def test_failures_before_an_answer(err: Exception, kind: Kind, hint: str) -> None:
    outcome = classify_exception(err)
    assert outcome.kind is kind
    assert outcome.code == type(err).__name__
    assert hint in (outcome.message or "")
    # What came back does not say the call did nothing: a gateway's 5xx, an unread 200.
    assert outcome.maybe_acted == (kind is Kind.TRANSIENT and "DataNotFound" not in outcome.code)


def test_a_throttle_of_any_body_is_a_call_refused_before_acting() -> None:
    """A bare 503 or 429 is a throttle: the repeat of a deletion after one that finds the
    resource gone is no proof the first call deleted it (the ID may never have existed)."""
    from swarm_cli.ec2 import refused_before_acting

    assert refused_before_acting(HttpError(503, "r", "empty body"))
    unavailable = {"Error": {"Code": "ServiceUnavailable", "Message": "m"}}
    answered = {"ResponseMetadata": {"HTTPStatusCode": 503}, **unavailable}
    assert not refused_before_acting(ClientError(answered, "DeleteSnapshot"))  # EC2's own
    assert refused_before_acting(HttpError(429, "r", "empty body"))
    assert refused_before_acting(HttpError(404, "r", "empty body"))
    assert not refused_before_acting(HttpError(502, "r", "empty body"))
    assert not refused_before_acting(HttpError(500, "r", "empty body"))
    assert not refused_before_acting(bce.ReadTimeoutError(endpoint_url="x"))
    assert refused_before_acting(bce.EndpointConnectionError(endpoint_url="x"))


def test_other_exceptions_are_raised_again() -> None:
    with pytest.raises(ZeroDivisionError):
        classify_exception(ZeroDivisionError())


def test_client_sends_exactly_one_request_per_call() -> None:
    client = make_client("us-east-1", max_pool=64)
    config = client.meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert config.max_pool_connections == 64


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        (None, None),
        ("", ""),
        ("https://ec2.us-east-1.amazonaws.com", "https://ec2.us-east-1.amazonaws.com"),
        (
            "http://user:s3cr%40t@proxy.example:8080/ec2?x=1",
            "http://***@proxy.example:8080/ec2?x=***",
        ),
        ("https://token@host/", "https://***@host/"),
        ("http://u:p@ss@127.0.0.1:5000", "http://***@127.0.0.1:5000"),
    ],
)
def test_redact_url(url: str | None, redacted: str | None) -> None:
    assert redact_url(url) == redacted


def test_scrub_hides_user_info_in_any_url_of_a_text() -> None:
    text = 'Could not connect to "http://u:p@ss@10.0.0.1:80/" via https://k:v@proxy:3128 x@y'
    assert (
        scrub(text)
        == 'Could not connect to "http://***@10.0.0.1:80/" via https://***@proxy:3128 x@y'
    )
    assert scrub("no URL, mail a@b.c") == "no URL, mail a@b.c"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_endpoint_never_echoes_its_password() -> None:
    endpoint = f"http://admin:hunter2@127.0.0.1:{closed_port()}"
    client = make_client("us-east-1", endpoint_url=endpoint, timeout=2.0)
    with pytest.raises(bce.EndpointConnectionError) as caught:
        client.terminate_instances(InstanceIds=["i-0123456789abcdef0"])
    assert "hunter2" in str(caught.value), "botocore's message embeds the URL"
    outcome = Terminate(client)(["i-0123456789abcdef0"])["i-0123456789abcdef0"]
    assert outcome.kind is Kind.UNREACHABLE
    assert "hunter2" not in (outcome.message or "") and "admin" not in (outcome.message or "")
    assert "***@127.0.0.1" in (outcome.message or "")


class Answer:
    """The one answer the test server gives to every request."""

    status = 200
    body = b""
    headers: dict[str, str] = {}  # noqa: RUF012 - replaced whole by each test


@pytest.fixture
def http_server() -> Iterator[tuple[str, type[Answer]]]:
    """A plain HTTP server on 127.0.0.1 that answers whatever the test sets in ``Answer``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(Answer.status)
            for name, value in Answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(Answer.body)))
            self.end_headers()
            self.wfile.write(Answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Answer
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


HTML = b"<!DOCTYPE html>\n<html><body><h1>Service Unavailable</h1></body></html>"
XHTML = (
    b'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
    b'Strict//EN" "x"><html><body>503 Service Unavailable</body></html>'
)
XML_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>Unavailable</Code>'
    b"<Message>later</Message></Error></Errors><RequestID>req-xml</RequestID></Response>"
)


@pytest.mark.parametrize(
    ("status", "body", "kind", "code"),
    [
        (429, b"", Kind.THROTTLED, "HttpError"),
        (503, b"", Kind.THROTTLED, "HttpError"),
        (503, HTML, Kind.THROTTLED, "HttpError"),
        (500, HTML, Kind.TRANSIENT, "HttpError"),
        (502, b"Bad Gateway", Kind.TRANSIENT, "HttpError"),
        (403, b"", Kind.FATAL, "HttpError"),
        (400, b"  plain text  ", Kind.PERMANENT, "HttpError"),
        (503, XML_ERROR, Kind.THROTTLED, "Unavailable"),
        (503, XHTML, Kind.THROTTLED, "HttpError"),  # XML, but no AWS answer: no <Code>
        (503, b"  <head><title>503</title></head>", Kind.THROTTLED, "HttpError"),
        (200, b"hello", Kind.TRANSIENT, "ResponseParserError"),
    ],
)
def test_http_answers_botocore_cannot_parse(
    http_server: tuple[str, type[Answer]], status: int, body: bytes, kind: Kind, code: str
) -> None:
    url, answer = http_server
    answer.status, answer.body = status, body
    answer.headers = {"x-amzn-RequestId": "req-1", "Content-Type": "text/html"}
    client = make_client("us-east-1", endpoint_url=url, timeout=5.0)
    outcomes = Terminate(client)(["i-00000001", "i-00000002"])
    assert set(outcomes) == {"i-00000001", "i-00000002"}
    outcome = outcomes["i-00000001"]
    assert (outcome.kind, outcome.code) == (kind, code)
    if code == "HttpError":
        assert (outcome.http_status, outcome.request_id) == (status, "req-1")


def test_botocore_alone_loses_the_status_of_an_empty_answer(
    http_server: tuple[str, type[Answer]],
) -> None:
    """Why make_client hooks the parser: without it, an empty 429 is a parse error."""
    url, answer = http_server
    raw = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=url,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )
    answer.status, answer.body, answer.headers = 429, b"", {}
    with pytest.raises(ResponseParserError):
        raw.terminate_instances(InstanceIds=["i-00000001"])
    answer.status = 503
    with pytest.raises(ClientError) as caught:
        raw.terminate_instances(InstanceIds=["i-00000001"])
    assert caught.value.response["Error"]["Code"] == "503"


def not_permitted(instance: str) -> Outcome:
    message = f"The instance '{instance}' may not be terminated. Modify its 'disableApiTermination'"
    return Outcome(Kind.PERMANENT, "OperationNotPermitted", message, 400, "r")


def test_split_batch_fails_the_named_ids_and_halves_the_rest() -> None:
    ids = [f"i-{n:08x}" for n in range(7)]
    outcome = not_permitted(ids[3])
    split = split_batch(ids, outcome)
    assert split[ids[3]] is outcome
    rest = [split[i] for i in ids if i != ids[3]]
    assert {(o.kind, o.code, o.batch_limit) for o in rest} == {
        (Kind.REQUEUE, "OperationNotPermitted", 3)
    }

    missing = Outcome(Kind.MISSING, "InvalidInstanceID.NotFound", f"'{ids[0]}, {ids[6]}'")
    split = split_batch(ids, missing)
    assert split[ids[0]] is missing and split[ids[6]] is missing
    assert {split[i].batch_limit for i in ids[1:6]} == {3}  # five left: 3 + 2

    blind = split_batch(ids, not_permitted("i-ffffffff"))
    assert {(o.kind, o.batch_limit) for o in blind.values()} == {(Kind.REQUEUE, 4)}
    assert {o.batch_limit for o in split_batch(ids[:2], not_permitted("x")).values()} == {1}
    assert split_batch(ids[:1], outcome) == {ids[0]: outcome}, "alone, it takes the outcome"
    assert split_batch(ids[:2], not_permitted(ids[1]))[ids[0]].batch_limit == 1


def bisection_cost(n: int, bad: set[int], *, bisect: bool) -> tuple[int, int]:
    """Calls and instance-sends to clear ``n`` IDs of which ``bad`` are refused.

    The simulated API refuses a call holding a bad ID and names the first one in it, as
    EC2 does with termination protection. The queue follows the engine: requeued intents
    go back to the head, and a call holds at most the smallest ``batch_limit`` among its
    IDs. ``bisect=False`` ignores the limits, which is the old rule (the rest resent whole).
    """
    ids = [f"i-{k:08x}" for k in range(n)]
    refused = {ids[k] for k in bad}
    queue: deque[tuple[str, int]] = deque((i, n) for i in ids)
    calls = sends = 0
    while queue:
        batch = [queue.popleft()]
        cap = batch[0][1]
        while queue and len(batch) < min(cap, queue[0][1]):
            cap = min(cap, queue[0][1])
            batch.append(queue.popleft())
        calls += 1
        sends += len(batch)
        first_bad = next((i for i, _ in batch if i in refused), None)
        if first_bad is None:
            continue
        outcomes = split_batch([i for i, _ in batch], not_permitted(first_bad))
        back = [
            (i, min(limit, outcomes[i].batch_limit or limit) if bisect else limit)
            for i, limit in batch
            if outcomes[i].kind is Kind.REQUEUE
        ]
        queue.extendleft(reversed(back))
    return calls, sends


PLACEMENTS: dict[str, Sequence[int]] = {
    "adjacent at the start": range(5),
    "spread evenly": range(50, 500, 100),
    "random (seed 1)": random.Random(1).sample(range(500), 5),
    "random (seed 2)": random.Random(2).sample(range(500), 5),
}


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_bisection_costs_far_fewer_sends_than_resending_the_rest(placement: str) -> None:
    bad = set(PLACEMENTS[placement])
    old_calls, old_sends = bisection_cost(500, bad, bisect=False)
    new_calls, new_sends = bisection_cost(500, bad, bisect=True)
    assert (old_calls, old_sends) == (6, 500 + 499 + 498 + 497 + 496 + 495)
    # Each level of halving resends only the parts that still hold a bad ID: about
    # n * (1 + log2 k) sends against n * (k + 1), for a few more (small) calls.
    assert new_sends < 0.6 * old_sends
    assert new_calls <= 4 * len(bad) + 1


def test_bisection_advantage_grows_with_the_number_of_bad_ids() -> None:
    bad = set(range(25, 1000, 50))  # 20 spread over 1000
    old_sends = bisection_cost(1000, bad, bisect=False)[1]
    new_sends = bisection_cost(1000, bad, bisect=True)[1]
    assert new_sends < 0.3 * old_sends


def test_a_query_string_secret_in_the_endpoint_is_redacted_too() -> None:
    from swarm_cli.ec2 import redact_url

    assert redact_url("http://u:p@127.0.0.1:9/x?token=s3cret&a=1") == (
        "http://***@127.0.0.1:9/x?token=***&a=***"
    )
    assert redact_url("https://ec2.us-east-1.amazonaws.com") == (
        "https://ec2.us-east-1.amazonaws.com"
    )


class Refuses:
    """A client whose every call fails with one error."""

    def __init__(self, err: Exception) -> None:
        self.err = err

    def __getattr__(self, method: str) -> Any:
        def call(**_: Any) -> Any:
            raise self.err

        return call


def test_every_batch_call_splits_on_the_ids_an_error_names() -> None:
    from swarm_cli.actions import ACTIONS
    from swarm_cli.describe import AttributeCheck, DescribeBatch
    from swarm_cli.ec2 import InstanceCall
    from swarm_cli.wait import WaitForState

    ids = [f"i-{n:08x}" for n in range(5)]
    unknown = Refuses(client_error("InvalidInstanceID.NotFound", 400, f"'{ids[1]}' unknown"))
    named = {
        "terminate": InstanceCall(unknown, ACTIONS["terminate"])(ids)[ids[1]],
        "describe": DescribeBatch(unknown)(ids)[ids[1]],
        "wait stopped": WaitForState(unknown, "stopped")(ids)[ids[1]],
        "wait terminated": WaitForState(unknown, "terminated")(ids)[ids[1]],
        "attribute": AttributeCheck(unknown, "disableApiStop")([ids[1]])[ids[1]],
    }
    assert {k: (o.kind, o.code) for k, o in named.items()} == {
        "terminate": (Kind.MISSING, "InvalidInstanceID.NotFound"),
        "describe": (Kind.MISSING, "InvalidInstanceID.NotFound"),
        "wait stopped": (Kind.MISSING, "NotListed"),
        "wait terminated": (Kind.SUCCEEDED, "Reached"),
        "attribute": (Kind.MISSING, "InvalidInstanceID.NotFound"),
    }
    for call in (InstanceCall(unknown, ACTIONS["stop"]), DescribeBatch(unknown)):
        rest = [o for i, o in call(ids).items() if i != ids[1]]
        assert {(o.kind, o.batch_limit) for o in rest} == {(Kind.REQUEUE, 2)}

    throttled = Refuses(client_error("RequestLimitExceeded", 503, f"'{ids[1]}'"))
    for call in (InstanceCall(throttled, ACTIONS["stop"]), DescribeBatch(throttled)):
        assert {o.kind for o in call(ids).values()} == {Kind.THROTTLED}
    # Malformed names its ID for describe, which reads it as missing; an action fails it.
    malformed = Refuses(client_error("InvalidInstanceID.Malformed", 400, f"'{ids[0]}'"))
    assert DescribeBatch(malformed)(ids)[ids[0]].kind is Kind.MISSING
    assert InstanceCall(malformed, ACTIONS["stop"])(ids)[ids[0]].kind is Kind.PERMANENT


def test_unknown_regions_are_those_of_no_partition() -> None:
    import boto3

    known = {
        region
        for partition in boto3.session.Session().get_available_partitions()
        for region in boto3.session.Session().get_available_regions("ec2", partition)
    }
    assert {"us-east-1", "cn-north-1", "us-gov-west-1"} <= known
    assert unknown_regions([*known, "us-eats-1", "eu-west-9"]) == ["eu-west-9", "us-eats-1"]


def _throttled(request: Any, **_: Any) -> Any:
    from test_plan import ec2_error

    return ec2_error(request, 503, "RequestLimitExceeded", "slow down")


def test_was_already_is_said_only_when_no_earlier_call_of_the_run_may_have_acted(
    sandbox: Any,
) -> None:
    """EC2's PreviousState in the target says this call changed nothing, but after a call
    that may have acted (its answer lost) the instance may be stopped by that call: only
    a throttled call before it (EC2 did nothing) leaves it this run's first."""
    from swarm_cli.actions import ACTIONS
    from swarm_cli.ec2 import InstanceCall
    from swarm_cli.sandbox import CREDENTIALS

    first, second = sandbox.launch(2)
    sandbox.client().stop_instances(InstanceIds=[first])  # stopped before the run
    client = make_client("us-east-1", endpoint_url=sandbox.endpoint, credentials=CREDENTIALS)
    calls = {"n": 0}

    def once_throttled(request: Any, **kw: Any) -> Any:
        calls["n"] += 1
        return _throttled(request) if calls["n"] == 1 else None

    client.meta.events.register("before-send.ec2.StopInstances", once_throttled)
    stop = InstanceCall(client, ACTIONS["stop"])
    with pytest.raises(ClientError):
        stop.send([first])
    out = stop.read([first], stop.send([first]))
    assert out[first].kind is Kind.SUCCEEDED and out[first].code == "WasAlready"

    lost = {"n": 0}

    def answer_lost(**_: Any) -> None:
        lost["n"] += 1
        if lost["n"] == 1:
            raise bce.ReadTimeoutError(endpoint_url=sandbox.endpoint)

    client.meta.events.register("after-call.ec2.StopInstances", answer_lost)
    with pytest.raises(bce.ReadTimeoutError):
        stop.send([second])  # it stopped the instance; the answer never came
    out = stop.read([second], stop.send([second]))
    assert out[second].kind is Kind.SUCCEEDED and out[second].code is None  # its own doing


def test_a_describe_with_patience_gives_up_only_after_that_long_without_a_read() -> None:
    from swarm_cli.describe import LATE_CODE, DescribeBatch

    now = [0.0]
    ids = ["i-00000001", "i-00000002"]
    throttled = Refuses(client_error("RequestLimitExceeded", 503, "slow down"))
    call = DescribeBatch(throttled, patience=5.0, clock=lambda: now[0])
    now[0] = 4.0
    assert {o.kind for o in call(ids).values()} == {Kind.THROTTLED}  # still asked
    # An answer that read an instance starts the patience again.
    listed = {"Reservations": [{"Instances": [{"InstanceId": ids[0], "State": {"Name": "x"}}]}]}
    call.read(ids, listed)
    now[0] = 8.5
    assert not call.answers_unsent()
    now[0] = 9.0
    assert call.answers_unsent()
    late = call(ids)  # answered with no call at all
    assert {(o.kind, o.code) for o in late.values()} == {(Kind.PERMANENT, LATE_CODE)}
