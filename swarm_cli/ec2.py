"""EC2 through boto3: the client, the terminate call, and what its answers mean."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)

from .outcome import Kind, Outcome

try:  # botocore's own list, so that new throttle codes reach us with upgrades
    from botocore.retries.standard import ThrottlingErrorDetector

    _BOTOCORE_THROTTLES = set(ThrottlingErrorDetector._THROTTLED_ERROR_CODES)
except (ImportError, AttributeError):  # pragma: no cover - older or newer botocore
    _BOTOCORE_THROTTLES = set()

THROTTLE_CODES = _BOTOCORE_THROTTLES | {
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "RequestThrottled",
    "SlowDown",
    "EC2ThrottledException",
}
FATAL_CODES = {
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "SignatureDoesNotMatch",
    "OptInRequired",
    "Blocked",
    "AccessDenied",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidToken",
    "MissingAuthenticationToken",
    "IncompleteSignature",
}
MISSING_CODES = {"InvalidInstanceID.NotFound"}
# Codes whose message names the offending instances: the rest of the batch is retried.
PER_INSTANCE_CODES = MISSING_CODES | {
    "InvalidInstanceID.Malformed",
    "OperationNotPermitted",
    "IncorrectInstanceState",
}
DRY_RUN_OK = "DryRunOperation"
INSTANCE_IN_MESSAGE = re.compile(r"\bi-[0-9a-zA-Z]+\b")


def make_client(
    region: str | None,
    *,
    profile: str | None = None,
    endpoint_url: str | None = None,
    max_pool: int = 10,
    timeout: float = 30.0,
    credentials: Mapping[str, str] | None = None,
) -> Any:
    """One client for every thread; botocore's own retries off so the window sees all."""
    session = boto3.session.Session(profile_name=profile, region_name=region, **(credentials or {}))
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        max_pool_connections=max(10, max_pool),
        connect_timeout=min(timeout, 10.0),
        read_timeout=timeout,
        user_agent_extra="swarm-cli",
    )
    return session.client("ec2", endpoint_url=endpoint_url, config=config)


def classify_error(err: ClientError) -> Outcome:
    response = err.response
    error = response.get("Error", {})
    meta = response.get("ResponseMetadata", {})
    code = error.get("Code") or "Unknown"
    status = meta.get("HTTPStatusCode")
    message = error.get("Message")
    request_id = meta.get("RequestId")
    if code == DRY_RUN_OK:
        kind = Kind.SUCCEEDED
    elif code in THROTTLE_CODES or status == 429:
        kind = Kind.THROTTLED
    elif code in FATAL_CODES:
        kind = Kind.FATAL
    elif code in MISSING_CODES:
        kind = Kind.MISSING
    elif status is not None and status >= 500:
        kind = Kind.TRANSIENT
    else:
        kind = Kind.PERMANENT
    return Outcome(kind, code, message, status, request_id)


def classify_exception(err: Exception) -> Outcome:
    """Failures that never reached an API answer."""
    code = type(err).__name__
    if isinstance(err, ClientError):
        return classify_error(err)
    if isinstance(err, NoCredentialsError | PartialCredentialsError | NoRegionError):
        return Outcome(Kind.FATAL, code, str(err))
    # Connection errors, read timeouts (ambiguous, but terminate is safe to repeat) and
    # the rest of botocore's own failures: worth another try.
    if isinstance(err, BotoCoreError):
        return Outcome(Kind.TRANSIENT, code, str(err))
    raise err


def _split_batch(ids: Sequence[str], outcome: Outcome) -> dict[str, Outcome]:
    """One bad ID fails the whole call: fail those it names, retry the others."""
    if len(ids) == 1:
        return {ids[0]: outcome}
    named = set(INSTANCE_IN_MESSAGE.findall(outcome.message or "")) & set(ids)
    if not named:
        return {i: Outcome(Kind.REQUEUE, outcome.code, outcome.message, isolate=True) for i in ids}
    return {
        i: outcome if i in named else Outcome(Kind.REQUEUE, outcome.code, outcome.message)
        for i in ids
    }


class Terminate:
    """The action: terminate a batch of instances, one outcome per ID."""

    name = "terminate"

    def __init__(self, client: Any, *, dry_run: bool = False) -> None:
        self.client = client
        self.dry_run = dry_run

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        try:
            response = self.client.terminate_instances(InstanceIds=list(ids), DryRun=self.dry_run)
        except Exception as err:
            outcome = classify_exception(err)
            if outcome.code in PER_INSTANCE_CODES:
                return _split_batch(ids, outcome)
            return dict.fromkeys(ids, outcome)
        meta = response.get("ResponseMetadata", {})
        ok = Outcome(Kind.SUCCEEDED, None, None, meta.get("HTTPStatusCode"), meta.get("RequestId"))
        answered = {item["InstanceId"] for item in response.get("TerminatingInstances", [])}
        lost = Outcome(
            Kind.TRANSIENT,
            "NotInResponse",
            "the answer did not list this instance",
            ok.http_status,
            ok.request_id,
        )
        return {i: ok if i in answered else lost for i in ids}
