"""What one call did to one intent, as the engine needs to know it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from .ledger.record import MAYBE_DONE as MAYBE_DONE  # a resume takes it as maybe done

# Codes of calls that never reached the endpoint (no connection was made): no answer, but
# nothing can have happened.
NEVER_LEFT = frozenset({"EndpointConnectionError", "ConnectTimeoutError"})


def maybe_done(outcome: Outcome) -> Outcome:
    """``outcome``, its message saying the call may have happened."""
    if (outcome.message or "").endswith(MAYBE_DONE):
        return outcome
    said = f"{outcome.message}: " if outcome.message else ""
    return replace(outcome, message=f"{said}{MAYBE_DONE}")


class Kind(enum.Enum):
    SUCCEEDED = "succeeded"  # done (or, in a dry run, would be done)
    THROTTLED = "throttled"  # the API said slow down: back to the queue, never a failure
    TRANSIENT = "transient"  # 5xx and unclassified trouble: retry with backoff, bounded
    UNREACHABLE = "unreachable"  # no answer at all (refused, reset, timed out): maybe an outage
    PERMANENT = "permanent"  # the API refused this intent: fail at once
    MISSING = "missing"  # the resource does not exist
    FATAL = "fatal"  # credentials or permission: stop everything
    REQUEUE = "requeue"  # not tried: another ID in the same call failed it
    NOT_YET = "not-yet"  # asked and answered, but not there yet (a wait): ask again later


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    code: str | None = None
    message: str | None = None
    http_status: int | None = None
    request_id: str | None = None
    # With REQUEUE: travel next in calls of at most this many IDs (1 sends it alone),
    # so that a batch holding several bad IDs is bisected instead of resent whole.
    batch_limit: int | None = None
    # The call left and what came back does not say whether it acted: an answer nobody
    # could read (a 200 with an empty or truncated body), or an error of the endpoint's
    # own (a 5xx: InternalError, a gateway's 502 or 504) that may have come after EC2
    # acted. Once its attempts are spent the intent is not known done, never failed.
    maybe_acted: bool = False

    @property
    def endpoint_error(self) -> bool:
        """An error of the endpoint's own (a 5xx that is no throttle, nor a refusal such
        as InsufficientInstanceCapacity): a whole run of them, and nothing else, is an
        endpoint down or restarting, not failing intents."""
        return self.kind is Kind.TRANSIENT and self.maybe_acted and (self.http_status or 0) >= 500

    @property
    def answered(self) -> bool:
        """The API answered without a sign of overload."""
        return self.kind in (
            Kind.SUCCEEDED,
            Kind.PERMANENT,
            Kind.MISSING,
            Kind.REQUEUE,
            Kind.NOT_YET,
        )
