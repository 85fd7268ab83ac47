"""Classification of botocore's answers; the calls themselves are tested against the sandbox."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from swarm_cli.ec2 import classify_error, classify_exception, make_client
from swarm_cli.outcome import Kind


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
        ("SomethingNew", 429, Kind.THROTTLED),
        ("InternalError", 500, Kind.TRANSIENT),
        ("Unavailable", 503, Kind.TRANSIENT),
        ("InvalidInstanceID.NotFound", 400, Kind.MISSING),
        ("InvalidInstanceID.Malformed", 400, Kind.PERMANENT),
        ("OperationNotPermitted", 400, Kind.PERMANENT),
        ("IncorrectInstanceState", 400, Kind.PERMANENT),
        ("AuthFailure", 401, Kind.FATAL),
        ("UnauthorizedOperation", 403, Kind.FATAL),
        ("DryRunOperation", 412, Kind.SUCCEEDED),
    ],
)
def test_error_codes_map_to_outcomes(code: str, status: int, kind: Kind) -> None:
    outcome = classify_error(client_error(code, status))
    assert outcome.kind is kind
    assert (outcome.code, outcome.http_status, outcome.request_id) == (code, status, "r")


def test_failures_before_an_answer() -> None:
    assert classify_exception(NoCredentialsError()).kind is Kind.FATAL
    assert classify_exception(EndpointConnectionError(endpoint_url="x")).kind is Kind.TRANSIENT
    assert classify_exception(ReadTimeoutError(endpoint_url="x")).kind is Kind.TRANSIENT
    with pytest.raises(ZeroDivisionError):
        classify_exception(ZeroDivisionError())


def test_client_sends_exactly_one_request_per_call() -> None:
    client = make_client("us-east-1", max_pool=64)
    config = client.meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert config.max_pool_connections == 64
