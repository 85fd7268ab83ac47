"""``--wait`` for an operation of the registry: wait until each resource it did is gone.

The resources a deletion got done are asked again through the operation's Describe
call (its entry's :class:`~swarm_cli.actions.operations.Observe`), filtered and
batched as :mod:`swarm_cli.observe` reads them, through a window on the Describe
bucket, by the same engine and with the same deadline, progress and report as the
instances' ``--wait`` (:func:`swarm_cli.wait.run_wait`). A resource is gone when the
call no longer lists it or shows it in a final gone state (a volume ``deleted``, an
image ``deregistered``); one on its way (a volume ``deleting``) is asked again after
the engine's poll interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console

from .actions import DESCRIBE_LIMITS, ActionSpec
from .actions.operations import Observe, Operation
from .ec2 import answered_by
from .engine import Clock
from .observe import describe, observe_api
from .outcome import Kind, Outcome
from .report import Pair
from .run import Job
from .wait import Waiting, WaitReport, run_wait


class WaitGone(Waiting):
    """An engine action: one filtered Describe call, and which resources are gone."""

    split_codes: frozenset[str] = frozenset()  # a filter never fails on an unknown ID

    def __init__(
        self,
        client: Any,
        op: Operation,
        *,
        deadline: float = float("inf"),
        clock: Clock = time.monotonic,
    ) -> None:
        if op.observe is None:
            raise ValueError(f"{op.name}: nothing shows it done, so nothing to wait for")
        super().__init__(client, op.verb, deadline=deadline, clock=clock)
        self.observe: Observe = op.observe
        self._api = observe_api(op)
        self._final = op.observe.gone_states - op.observe.passing_states

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        return describe(self.client, self.observe, ids)

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        status, request_id = answered_by(response)
        o = self.observe
        states = {
            item.get(o.id_key): str(item.get("State") or "present")
            for item in response.get(o.key, [])
        }
        out: dict[str, Outcome] = {}
        for i in ids:
            state = states.get(i)
            if state is None:
                out[i] = self._reached(i, f"not listed by {self._api}", status, request_id)
            elif state in self._final:
                out[i] = self._reached(i, state, status, request_id)
            else:
                self._saw(i, state)
                out[i] = Outcome(Kind.NOT_YET, state, None, status, request_id)
        return out


def wait_gone(
    op: Operation,
    job: Job,
    done: Mapping[Pair, Sequence[str]],
    make_client: Callable[[Pair], Any],
    console: Console,
    *,
    timeout: float = 600.0,
) -> WaitReport:
    """Wait, all pairs at once, until the resources in ``done`` (what the run got done)
    are gone. Each ends reached (``succeeded``), ``failed`` with ``WaitTimeout``, or
    ``pending`` if the wait was interrupted."""
    if op.observe is None:
        raise ValueError(f"{op.name}: nothing shows it done, so nothing to wait for")
    spec = ActionSpec(
        name="wait",
        api=observe_api(op),
        method=op.observe.method,
        verb="reached",
        limits=DESCRIBE_LIMITS,
        resource=op.resource,
    )

    def make_action(client: Any, deadline: float, clock: Clock) -> Waiting:
        return WaitGone(client, op, deadline=deadline, clock=clock)

    return run_wait(spec, op.verb, job, done, make_action, make_client, console, timeout=timeout)
