"""EC2 through boto3: the client, what its answers mean, and the one shape of a call on a
batch of IDs (:class:`BatchCall`) that every engine action on EC2 takes."""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
import botocore.exceptions
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from .actions import ACTIONS, ActionSpec
from .ledger import WAS_ALREADY_CODE
from .outcome import Kind, Outcome
from .states import ON_ITS_WAY_TO

try:  # botocore's own lists, so that new throttle codes reach us with upgrades
    from botocore.retries import standard as _standard
except ImportError:  # pragma: no cover - a botocore without retries/standard.py
    _standard = None


def _botocore_private(owner: str, name: str) -> frozenset[Any]:
    """A private class attribute of botocore's retry module, or nothing if a release moved it."""
    return frozenset(getattr(getattr(_standard, owner, None), name, None) or ())


BOTOCORE_THROTTLE_CODES: frozenset[str] = _botocore_private(
    "ThrottledRetryableChecker", "_THROTTLED_ERROR_CODES"
)
BOTOCORE_THROTTLE_STATUSES: frozenset[int] = _botocore_private(
    "ThrottlingStatusCodeChecker", "_THROTTLING_STATUS_CODES"
)
# Our own copy keeps the classification right if botocore renames its private lists.
THROTTLE_CODES = BOTOCORE_THROTTLE_CODES | {
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
# EC2 says 503 when a bucket is empty; a load balancer in front says 503 or 429 when
# overloaded. Either way the answer is to slow down, whatever code (if any) came with it.
THROTTLE_STATUSES = BOTOCORE_THROTTLE_STATUSES | {429, 503}
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
    "PendingVerification",  # a new account not verified yet: no call of it will do
    "AccessDenied",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidToken",
    "MissingAuthenticationToken",
    "IncompleteSignature",
}
MISSING_CODES = {"InvalidInstanceID.NotFound"}
# EC2's server errors (HTTP 500) that are refusals: no capacity to start or move the
# instance now. Worth a retry (capacity comes back), but the call did nothing, and the
# endpoint is not down.
REFUSED_5XX_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientAddressCapacity",
        "InsufficientVolumeCapacity",
    }
)
# Codes whose message names the offending instances: the rest of the batch is retried.
PER_INSTANCE_CODES = MISSING_CODES | {
    "InvalidInstanceID.Malformed",
    "OperationNotPermitted",
    "IncorrectInstanceState",
}
DRY_RUN_OK = "DryRunOperation"
INSTANCE_IN_MESSAGE = re.compile(r"\bi-[0-9a-zA-Z]+\b")
# Any EC2 resource ID (snap-..., vol-..., eipalloc-...): only those of the batch count.
ID_IN_MESSAGE = re.compile(r"\b[a-z]+-[0-9a-zA-Z]+\b")
# What an ID named in an error gets, from the error's outcome (see split_batch).
Named = Callable[[str, Outcome], Outcome]

_SSO_LOGIN = "run `aws sso login` (with --profile if you use one), then run swarm again"
# Failures of credentials or set-up, and what the user can do about each. Retrying cannot
# help: an expired SSO login stays expired however long the engine backs off.
CREDENTIAL_HINTS: dict[str, str] = {
    "UnauthorizedSSOTokenError": _SSO_LOGIN,
    "SSOTokenLoadError": _SSO_LOGIN,
    "TokenRetrievalError": _SSO_LOGIN,
    "SSOError": _SSO_LOGIN,
    "CredentialRetrievalError": (
        "the credential source named above failed: check its credential_process or "
        "role settings in your AWS config"
    ),
    "RefreshWithMFAUnsupportedError": (
        "these credentials need an MFA code to refresh: get session credentials "
        "(e.g. `aws sts get-session-token`) and run again"
    ),
    "NoCredentialsError": (
        "give swarm credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "--profile, or `aws configure` / `aws sso login`"
    ),
    "PartialCredentialsError": (
        "complete the credentials: an access key id needs its secret key "
        "(and temporary keys their session token)"
    ),
    "NoRegionError": "name a region with --region or AWS_REGION",
    "ProfileNotFound": "check the profile name (--profile or AWS_PROFILE) against ~/.aws/config",
}


def _botocore_errors(*names: str) -> tuple[type[Exception], ...]:
    """The named botocore exceptions that this release defines (some are newer than others)."""
    found = (getattr(botocore.exceptions, name, None) for name in names)
    return tuple(e for e in found if isinstance(e, type) and issubclass(e, Exception))


CREDENTIAL_ERRORS = _botocore_errors(*CREDENTIAL_HINTS)
REQUEST_ERRORS = _botocore_errors("ParamValidationError")
# No answer at all: subclasses cover EndpointConnectionError, ConnectTimeoutError and
# ProxyConnectionError (ConnectionError), ReadTimeoutError and ConnectionClosedError
# (HTTPClientError). Named too, in case a release moves one out from under its parent.
UNREACHABLE_ERRORS = _botocore_errors(
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ConnectionClosedError",
    "ProxyConnectionError",
    "ConnectionError",
    "HTTPClientError",
)

# scheme://userinfo@ : userinfo cannot hold "/", "?", "#" or whitespace unencoded, but a
# raw "@" in a password is common, so the match runs to the last "@" before those.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#\"<>]*@")
_MESSAGE_LIMIT = 300


def redact_url(url: str | None) -> str | None:
    """The URL with any user info and every query value replaced by ``***``.

    Both are where a secret rides in a URL (``user:pass@``, ``?token=``).
    """
    if not url:
        return url
    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])
    if parts.query:
        hidden = "&".join(f"{key.partition('=')[0]}=***" for key in parts.query.split("&"))
        parts = parts._replace(query=hidden)
    return urlunsplit(parts)


def scrub(text: str) -> str:
    """The text with the user info of every URL in it replaced by ``***``.

    botocore puts the endpoint URL into its messages (``EndpointConnectionError``), and
    those messages reach the terminal and the ledger.
    """
    return _USERINFO.sub(r"\g<scheme>***@", text)


def _describe(err: BaseException) -> str:
    # Parser errors carry the whole body; the ledger needs the gist, not a page of HTML.
    # One line: it goes into the ledger, a summary line and a CI log.
    text = " ".join(scrub(str(err)).split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


class HttpError(Exception):
    """An HTTP error whose body is not EC2's XML: empty, or a proxy's or balancer's page.

    botocore reads such an answer as a ``ClientError`` whose code is the status, or fails to
    parse it at all (an empty 429), and loses the status on the way.
    """

    def __init__(self, status: int, request_id: str | None, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.request_id = request_id
        self.text = text


def _looks_like_xml(body: bytes) -> bool:
    """An AWS error answer: XML naming its error's <Code> (EC2's Response/Errors/Error, or
    STS's ErrorResponse/Error). A balancer's or a proxy's page, XHTML with an XML prolog
    included, names none, and is no answer of the API's."""
    head = body.lstrip()[:16].lower()
    if not head.startswith(b"<") or head.startswith((b"<html", b"<!doctype html")):
        return False
    return b"<Code>" in body[:8192]


def _answers(body: bytes, operation: str) -> bool:
    """Whether a success's body is EC2's answer to ``operation``: XML rooted at
    ``<{operation}Response``. A proxy's or a portal's page answered 200 (a login page in
    XHTML parses as XML too) is none, and says nothing of what EC2 did."""
    return f"<{operation}Response".encode() in body[:1024]


def _raise_unparsable_errors(
    response_dict: Mapping[str, Any], operation_model: Any = None, **_: Any
) -> None:
    """botocore ``before-parse`` handler: raise HttpError for an error that is not XML,
    and botocore's own parse error for a success that is not EC2's answer (botocore
    would read one that parses as XML as an answer listing nothing: a deletion done, a
    resource gone)."""
    status = response_dict.get("status_code")
    body = response_dict.get("body")
    if not isinstance(status, int) or not isinstance(body, bytes):
        return
    if status < 300 and operation_model is not None:
        if not _answers(body, operation_model.name):
            snippet = " ".join(body.decode("utf-8", "replace").split())[:120]
            raise ResponseParserError(
                f"HTTP {status} that is not EC2's answer to {operation_model.name}: "
                + (snippet or "empty body")
            )
        return
    if status < 400:
        return
    if _looks_like_xml(body):
        return
    headers = {str(k).lower(): v for k, v in (response_dict.get("headers") or {}).items()}
    request_id = headers.get("x-amzn-requestid") or headers.get("x-amz-request-id")
    snippet = " ".join(body.decode("utf-8", "replace").split())[:120]
    raise HttpError(status, request_id, f"non-XML body: {snippet}" if snippet else "empty body")


_shared_loader: Any = None


def new_session(
    *, profile: str | None = None, region: str | None = None, **credentials: str
) -> boto3.session.Session:
    """A boto3 session sharing one botocore data loader with every other of this process.

    EC2's service model is a large JSON file: a session of its own reads and parses
    it again, which costs a run's start a tenth of a second per session. ``profile`` is
    read before anything else: ``--profile`` stands whatever AWS_PROFILE names.
    """
    import botocore.session

    core = botocore.session.Session(profile=profile) if profile else botocore.session.get_session()
    return boto3.session.Session(
        botocore_session=_sharing(core), profile_name=profile, region_name=region, **credentials
    )


def profileless_session(region: str | None = None, **credentials: str) -> boto3.session.Session:
    """A session that reads no profile, whatever AWS_PROFILE names (one that does not
    exist included): for botocore's models and endpoints, and the sandbox's own keys."""
    import botocore.session

    core = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
    return boto3.session.Session(botocore_session=_sharing(core), region_name=region, **credentials)


def _sharing(core: Any) -> Any:
    """``core`` with the process's one data loader."""
    global _shared_loader
    if _shared_loader is None:
        _shared_loader = core.get_component("data_loader")
    else:
        core.register_component("data_loader", _shared_loader)
    return core


def unknown_regions(regions: Iterable[str]) -> list[str]:
    """The regions of no partition botocore knows, sorted.

    Read from botocore's endpoints data, which the client loads anyway: asking the
    session for EC2's regions would load EC2's service model first, before any client.
    """
    profileless_session()
    endpoints = _shared_loader.load_data("endpoints")
    known = {region for partition in endpoints["partitions"] for region in partition["regions"]}
    return sorted(set(regions) - known)


def make_client(
    region: str | None,
    *,
    profile: str | None = None,
    endpoint_url: str | None = None,
    max_pool: int = 10,
    timeout: float = 30.0,
    credentials: Mapping[str, str] | None = None,
    renewing: Any = None,
    profileless: bool = False,
) -> Any:
    """One client for every thread; botocore's own retries off so the window sees all.

    ``renewing``: botocore credentials that refresh themselves (an assumed role's), used
    instead of the fixed ``credentials`` so that a run may outlast a role session.
    ``profileless``: no profile read (the sandbox's clients, with its own keys).
    """
    if profileless:
        session = profileless_session(region, **(credentials or {}))
    else:
        session = new_session(profile=profile, region=region, **(credentials or {}))
    if renewing is not None:
        # boto3 has no public setter; botocore's session reads this before any provider.
        session._session._credentials = renewing
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        max_pool_connections=max(10, max_pool),
        connect_timeout=min(timeout, 10.0),
        read_timeout=timeout,
        user_agent_extra="swarm-cli",
    )
    client = session.client("ec2", endpoint_url=endpoint_url, config=config)
    client.meta.events.register("before-parse.ec2.*", _raise_unparsable_errors)
    client.meta.events.register("after-call.ec2", _require_the_list)
    return client


def _require_the_list(
    http_response: Any = None, parsed: Any = None, model: Any = None, **_: Any
) -> None:
    """botocore ``after-call`` handler: a Describe call's answer without its one list (a
    ``<tagSet>`` left out, where EC2 sends an empty one) is no answer, not one listing
    nothing: read so, a protected resource would show no tags, one still there none."""
    if model is None or not isinstance(parsed, Mapping) or not model.name.startswith("Describe"):
        return
    if getattr(http_response, "status_code", 200) >= 300:
        return
    lists = _list_members(model)
    if len(lists) == 1 and lists[0] not in parsed:
        raise ResponseParserError(f"answer to {model.name} without its list ({lists[0]})")


def _list_members(model: Any) -> tuple[str, ...]:
    with _lists_lock:
        known = _lists.get(model.name)
    if known is None:
        shape = model.output_shape
        members = shape.members.items() if shape is not None else ()
        known = tuple(name for name, member in members if member.type_name == "list")
        with _lists_lock:
            _lists[model.name] = known
    return known


_lists: dict[str, tuple[str, ...]] = {}
_lists_lock = threading.Lock()


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
    elif code in THROTTLE_CODES or status in THROTTLE_STATUSES:
        kind = Kind.THROTTLED
    elif code in FATAL_CODES:
        kind = Kind.FATAL
    elif code in MISSING_CODES:
        kind = Kind.MISSING
    elif status is not None and status >= 500:
        kind = Kind.TRANSIENT
    else:
        kind = Kind.PERMANENT
    said = scrub(message) if message else message
    # A 5xx of EC2's own may have come after it acted (see refused_before_acting), unless
    # it says there was no capacity to act.
    acted = kind is Kind.TRANSIENT and code not in REFUSED_5XX_CODES
    return Outcome(kind, code, said, status, request_id, maybe_acted=acted)


def _classify_http(err: HttpError) -> Outcome:
    if err.status in THROTTLE_STATUSES:
        kind = Kind.THROTTLED
    elif err.status >= 500:
        kind = Kind.TRANSIENT
    elif err.status in (401, 403):
        kind = Kind.FATAL
    else:
        kind = Kind.PERMANENT
    return Outcome(
        kind,
        type(err).__name__,
        _describe(err),
        err.status,
        err.request_id,
        maybe_acted=kind is Kind.TRANSIENT,  # a gateway's 502 or 504 may come after EC2 acted
    )


def _credential_hint(err: Exception) -> str:
    for cls in type(err).__mro__:
        hint = CREDENTIAL_HINTS.get(cls.__name__)
        if hint:
            return hint
    return "check the AWS credentials and configuration"  # pragma: no cover


# Calls botocore makes to renew credentials inside an EC2 call (a role's session ending,
# an SSO login's): their failure is the credentials', not the IDs' the EC2 call carried.
RENEWAL_OPERATIONS = frozenset(
    {
        "AssumeRole",
        "AssumeRoleWithWebIdentity",
        "AssumeRoleWithSAML",
        "GetRoleCredentials",
        "CreateToken",
    }
)
# What botocore raises when credentials it just renewed are expired already (a clock far
# off, a session shorter than botocore's refresh margin).
STILL_EXPIRED = "refreshed credentials are still expired"


def classify_exception(err: Exception) -> Outcome:
    """What a failed call means; exceptions that are not botocore's are raised again."""
    code = type(err).__name__
    if isinstance(err, ClientError) and err.operation_name in RENEWAL_OPERATIONS:
        refused = classify_error(err)
        if refused.kind is Kind.THROTTLED:
            # STS is busy (every shard renewing at the hour): the call goes again later.
            return replace(
                refused, message=f"getting the credentials ({err.operation_name}) was throttled"
            )
        return replace(
            refused,
            kind=Kind.FATAL,
            message=f"getting the credentials ({err.operation_name}) failed: "
            f"{refused.message or refused.code} -- nothing more is sent with them",
        )
    if isinstance(err, ClientError):
        return classify_error(err)
    if isinstance(err, HttpError):
        return _classify_http(err)
    if isinstance(err, CREDENTIAL_ERRORS):
        return Outcome(Kind.FATAL, code, f"{_describe(err)} -- {_credential_hint(err)}")
    if isinstance(err, REQUEST_ERRORS):
        return Outcome(Kind.PERMANENT, code, _describe(err))
    # Refused, reset, timed out: the endpoint may be down or overloaded, which is no fault
    # of the intents (a read timeout is ambiguous, but terminate is safe to repeat).
    if isinstance(err, UNREACHABLE_ERRORS):
        return Outcome(Kind.UNREACHABLE, code, _describe(err))
    # An answer nobody could read (a 200 that is not XML, a truncated body): worth another
    # try, and the engine bounds the attempts; the call may have happened all the same.
    if isinstance(err, ResponseParserError):
        return Outcome(Kind.TRANSIENT, code, _describe(err), maybe_acted=True)
    if isinstance(err, BotoCoreError):
        return Outcome(Kind.TRANSIENT, code, _describe(err))
    if unreadable_credentials(err):
        return Outcome(Kind.FATAL, "CredentialRetrievalError", unreadable_credentials_text(err))
    if isinstance(err, RuntimeError) and STILL_EXPIRED in str(err):
        return Outcome(
            Kind.FATAL,
            "ExpiredToken",
            f"{err} -- check this machine's clock, and that the role's session lasts "
            "over 15 minutes",
        )
    raise err


def unreadable_credentials(err: BaseException) -> bool:
    """Whether ``err`` is botocore failing to read what a credential source gave (a
    credential_process that printed a login prompt instead of JSON, an expiry no date
    parser reads): a ValueError raised inside botocore's credential providers, not a
    botocore error, and no fault of the call that asked for the credentials."""
    if not isinstance(err, ValueError):
        return False
    tb = err.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if name.endswith("botocore/credentials.py"):
            return True
        tb = tb.tb_next
    return False


def unreadable_credentials_text(err: BaseException) -> str:
    return (
        f"the credentials could not be read ({type(err).__name__}: {_describe(err)}) -- "
        "check the credential source in your AWS config; a credential_process must print "
        "its credentials as JSON (run it by hand to see what it prints)"
    )


def refused_before_acting(err: Exception) -> bool:
    """Whether a failed call surely changed nothing: it was throttled (a throttle code,
    RequestLimitExceeded and the like, or an HTTP 429 or 503 with no EC2 answer in it, as
    a balancer with no backend to give it to answers), or EC2 answered 4xx (it checks a
    request before it acts on it), or no connection to the endpoint was made. A 5xx of
    EC2's own (ServiceUnavailable, InternalError), a 502 or 504, a reset or a read
    time-out may have come after EC2 acted. (Were a bare 503 taken as "may have acted",
    an ID that never existed, sent again after one, would be recorded done for its
    NotFound.)"""
    if isinstance(
        err, (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectTimeoutError)
    ):
        return True
    if not isinstance(err, (ClientError, HttpError)):
        return False
    outcome = classify_exception(err)
    status = outcome.http_status
    bare_throttle = isinstance(err, HttpError) and outcome.kind is Kind.THROTTLED
    return (
        outcome.code in THROTTLE_CODES
        or bare_throttle
        or (status is not None and 400 <= status < 500)
    )


# 4xx refusals of a call of several instances after which EC2 may still have acted on its
# other IDs: protection refuses one instance, and those in other availability zones of
# the same call are still terminated (AWS-FACTS); moto stops or terminates the rest too.
ACTS_ON_THE_REST = frozenset({"OperationNotPermitted"})


def split_batch(
    ids: Sequence[str], outcome: Outcome, named: Named | None = None
) -> dict[str, Outcome]:
    """One bad ID fails the whole call: settle those it names and bisect the others.

    EC2 names one protected instance per error, so resending the rest whole would cost a
    full batch per bad ID. Halving the rest instead clears the halves without a bad ID at
    once, and each failing half names another one and is halved again. When the message
    names no ID of the batch, the halving is blind; a single ID takes the outcome itself.
    ``named(id, outcome)`` says what an ID the error names (or a lone ID) gets; by
    default, the outcome as it is.
    """
    settle = named or _as_it_is
    if len(ids) == 1:
        return {ids[0]: settle(ids[0], outcome)}
    bad = set(ID_IN_MESSAGE.findall(outcome.message or "")) & set(ids)
    rest = len(ids) - sum(1 for i in ids if i in bad)
    # EC2 may have acted on the rest of a call it refused for one protected instance.
    acted = outcome.maybe_acted or outcome.code in ACTS_ON_THE_REST
    requeue = replace(outcome, kind=Kind.REQUEUE, batch_limit=-(-rest // 2), maybe_acted=acted)
    return {i: settle(i, outcome) if i in bad else requeue for i in ids}


def _as_it_is(instance_id: str, outcome: Outcome) -> Outcome:
    return outcome


def describe_instances_by_id(client: Any, ids: Sequence[str]) -> dict[str, Any]:
    """DescribeInstances of these IDs, every page of it. An answer may hold only some of
    the reservations, and a NextToken (moto's holds 100; instances launched one by one
    are a reservation each): an instance on a later page is not missing. The first
    page's metadata stands for the answer."""
    request: dict[str, Any] = {"InstanceIds": list(ids)}
    response = dict(client.describe_instances(**request))
    reservations = list(response.get("Reservations", []))
    token = response.pop("NextToken", None)
    seen: set[str] = set()
    while token and token not in seen:  # a token seen before would page for ever
        seen.add(token)
        page = client.describe_instances(**request, NextToken=token)
        reservations += page.get("Reservations", [])
        token = page.get("NextToken")
    response["Reservations"] = reservations
    return response


def answered_by(response: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The HTTP status and request ID of an answer, for its outcomes."""
    meta = response.get("ResponseMetadata", {})
    return meta.get("HTTPStatusCode"), meta.get("RequestId")


class BatchCall(ABC):
    """The shape of every engine action on EC2: one API call for a batch of IDs, one
    outcome per ID.

    :meth:`send` makes the call and :meth:`read` turns its answer into outcomes. A call
    that fails is classified (:func:`classify_exception`) for every ID, unless its code
    is one of ``split_codes``, whose messages name the IDs at fault: those (and an ID
    sent alone) get :meth:`named`, and the rest go back to be sent in halves
    (:func:`split_batch`).
    """

    split_codes: Collection[str] = PER_INSTANCE_CODES
    # Whether a call may change anything: one of a read that got no answer did nothing.
    changes: bool = True

    def __call__(self, ids: Sequence[str]) -> Mapping[str, Outcome]:
        try:
            response = self.send(ids)
        except Exception as err:
            return self.failed(ids, classify_exception(err))
        return self.read(ids, response)

    @abstractmethod
    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        """The API call itself; raises what botocore raises."""

    @abstractmethod
    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        """The outcome of each ID from the call's answer."""

    def named(self, instance_id: str, outcome: Outcome) -> Outcome:
        """What an ID that an error names gets: the error's outcome, unless overridden."""
        return outcome

    def splits(self, code: str | None) -> bool:
        """Whether an error of ``code`` names the IDs at fault (see the class)."""
        return code in self.split_codes

    def failed(self, ids: Sequence[str], outcome: Outcome) -> dict[str, Outcome]:
        """The outcome of each ID of a call that failed with ``outcome``."""
        if self.splits(outcome.code):
            return split_batch(ids, outcome, self.named)
        return dict.fromkeys(ids, outcome)


class InstanceCall(BatchCall):
    """One instance action on a batch of instances: one API call, one outcome per ID."""

    def __init__(
        self,
        client: Any,
        spec: ActionSpec,
        *,
        dry_run: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.name = spec.name
        self.dry_run = dry_run
        self.params = dict(params or {})
        self._method = getattr(client, spec.method)
        self._lock = threading.Lock()  # the engine calls from several worker threads
        # ID -> calls of this run that carried it and may have acted (not surely refused):
        # a PreviousState in the target is this run's own doing once one came before.
        self._sent: dict[str, int] = {}

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        with self._lock:
            for i in ids:
                self._sent[i] = self._sent.get(i, 0) + 1
        try:
            response: Mapping[str, Any] = self._method(
                InstanceIds=list(ids), DryRun=self.dry_run, **self.params
            )
        except Exception as exc:
            if refused_before_acting(exc) and not (
                len(ids) > 1
                and isinstance(exc, ClientError)
                and classify_error(exc).code in ACTS_ON_THE_REST
            ):
                with self._lock:  # EC2 did nothing: no earlier call for the next one
                    for i in ids:
                        self._sent[i] -= 1
            raise
        return response

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        status, request_id = answered_by(response)
        ok = Outcome(Kind.SUCCEEDED, None, None, status, request_id)
        if self.spec.result_key is None:  # the answer lists nothing: success covers all
            return dict.fromkeys(ids, ok)
        items = response.get(self.spec.result_key, [])
        answered = {item["InstanceId"] for item in items}
        lost = Outcome(
            Kind.TRANSIENT,
            "NotInResponse",
            "the answer did not list this instance",
            status,
            request_id,
        )
        out = {i: ok if i in answered else lost for i in ids}
        target = self.spec.target_state
        # There already, or on its way there by someone else's call (stopping, for a stop).
        there = {target, ON_ITS_WAY_TO.get(target or "")} - {None}
        for item in items:
            before = (item.get("PreviousState") or {}).get("Name")
            with self._lock:
                first = self._sent.get(item["InstanceId"], 0) <= 1
            if before in there and first and item["InstanceId"] in out:
                # EC2 says this call changed nothing: a rollback must not undo it.
                message = f"was {before} already: the call changed nothing"
                out[item["InstanceId"]] = Outcome(
                    Kind.SUCCEEDED, WAS_ALREADY_CODE, message, status, request_id
                )
        return out


class Terminate(InstanceCall):
    """Terminate a batch of instances, one outcome per ID."""

    def __init__(self, client: Any, *, dry_run: bool = False) -> None:
        super().__init__(client, ACTIONS["terminate"], dry_run=dry_run)
