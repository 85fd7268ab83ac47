"""``--resume`` trusts the API, not only the ledger.

An intent the ledger does not show done may have been done all the same: its
call was in flight when the run was killed, its answer never came, or someone
else acted on the instance since. Before anything is sent again, the intents
not known done are looked up with DescribeInstances (batched, through a window
on the Describe bucket, as :mod:`swarm_cli.describe` reads any list), where the
action has a state that shows it done; those already there are recorded done
(``succeeded``, code :data:`ALREADY_CODE`) without a call, and only the rest
are sent. Reboot leaves no state to see: a resumed reboot resends every intent
not known done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from rich.console import Console

from .describe import InstanceInfo, MakeClient, describe_job
from .ledger import ALREADY_CODE
from .outcome import Kind, Outcome
from .report import Pair, Recorded
from .run import RunOptions
from .states import DONE_STATES

# Actions for which an instance EC2 does not know is done: terminated instances
# stay listed for about an hour, then vanish.
GONE_IS_DONE = frozenset({"terminate"})
# Within this many seconds of a call, what it terminated is still listed: one not
# listed at all was never there (another account or region, a typo).
STILL_LISTED = 45 * 60.0


@dataclass
class Reconciled:
    """What DescribeInstances showed of the intents a resume was about to send."""

    done: dict[Pair, dict[str, Outcome]] = field(default_factory=dict)
    checked: int = 0
    unread: int = 0  # could not be read (permission, an endpoint down): sent as before
    why: str = ""  # the errors that kept them unread: "UnauthorizedOperation x 3"
    found: dict[str, InstanceInfo] = field(default_factory=dict)

    @property
    def already(self) -> int:
        return sum(len(v) for v in self.done.values())


def reconcile(
    action: str,
    groups: Mapping[Pair, Sequence[str]],
    make_client: MakeClient,
    console: Console,
    *,
    options: RunOptions,
    recorded: Recorded | None = None,
) -> Reconciled:
    """Look the intents of ``groups`` up; those already in ``action``'s end state are done.

    One not listed at all is done for an action that makes instances vanish, if it is
    ``recorded`` (None: all are): an ID no run acted on is more likely in another region
    or account, or mistyped.
    """
    result = Reconciled()
    states = DONE_STATES.get(action)
    wanted = {p: list(ids) for p, ids in groups.items() if ids}
    if states is None or not wanted:
        return result
    read, report = describe_job(
        wanted, make_client, console, options=replace(options, ledger=None, progress="none")
    )
    now = datetime.now(timezone.utc)
    never_here = 0
    for pair, ids in wanted.items():
        infos = read.get(pair, {})
        # (Only where not being listed could count as done.)
        gone = [infos[i] is None for i in ids if i in infos] if action in GONE_IS_DONE else []
        trust = not none_listed(pair, gone, console)
        for i in ids:
            result.checked += 1
            if i not in infos:
                result.unread += 1
                continue
            info = infos[i]
            if info is None:
                held = recorded is None or recorded.holds(i, pair)
                if not (action in GONE_IS_DONE and held and trust):
                    continue
                since = None if recorded is None else recorded.since(i, now)
                if since is not None and since < STILL_LISTED:
                    never_here += 1  # it would be listed, terminated, had it been here
                    continue
                message = "DescribeInstances lists no such instance (terminated ones vanish)"
                result.done.setdefault(pair, {})[i] = _done(message)
                continue
            result.found[i] = info
            if info.state in states:
                result.done.setdefault(pair, {})[i] = _done(
                    f"{info.state} per DescribeInstances; not sent"
                )
    if never_here:
        console.print(
            f"resume: {never_here} ID(s) a run may have {action}d in the last "
            f"{STILL_LISTED / 60:.0f} min are not listed at all, where a terminated instance "
            "stays listed for about an hour: not taken as done (another account or region, a "
            "typo?); they are sent again, to come back missing",
            markup=False,
        )
    if result.unread:
        result.why = report.why()
    return result


def none_listed(pair: Pair, gone: Sequence[bool], console: Console) -> bool:
    """Whether the Describe call listed none of a pair's IDs (``gone``: for each one read,
    whether it was not listed), saying so. Then not being listed says nothing of a run
    having acted: the credentials may be another account's (a ledger of default
    credentials names none), or the IDs mistyped. They are sent again, to get EC2's own
    answer (missing, if so), rather than taken as done."""
    if not gone or not all(gone):
        return False
    console.print(
        f"resume: in {pair.label}, EC2 lists none of the {len(gone)} ID(s) looked up: "
        "not taken as done (other credentials than the run's, another account, mistyped "
        "IDs?); they are sent again, and any the run did act on before it was stopped come "
        "back missing (swarm ledger failed --missing-ok leaves those out)",
        markup=False,
    )
    return True


def _done(message: str) -> Outcome:
    return Outcome(Kind.SUCCEEDED, ALREADY_CODE, message)
