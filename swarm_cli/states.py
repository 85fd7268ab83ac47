"""EC2's instance states that are on the way to others, and what that means for an action.

An instance takes tens of seconds to stop or start: ``stopping`` on its way to
``stopped``, ``pending`` to ``running``. EC2 refuses a start of one still stopping, and
a stop of one still pending (IncorrectInstanceState), only until it gets there.
"""

from __future__ import annotations

from collections.abc import Mapping

# The state an instance passes through on its way to each action's end state.
ON_ITS_WAY_TO = {"stopped": "stopping", "running": "pending", "terminated": "shutting-down"}
# The states on the way that end where an action applies again, and where they end.
PASSING_TO = {"stopping": "stopped", "pending": "running"}
# For each action, the state on the way in which EC2 refuses it until the instance is there.
REFUSED_ON_THE_WAY = {"start": "stopping", "stop": "pending"}
# EC2's code for an action refused in the instance's state.
INCORRECT_STATE = "IncorrectInstanceState"

# The states that show an action done (or under way, which EC2 finishes by itself).
DONE_STATES: Mapping[str, frozenset[str]] = {
    "terminate": frozenset({"shutting-down", "terminated"}),
    "stop": frozenset({"stopping", "stopped"}),
    "start": frozenset({"pending", "running"}),
}


def done_words(action: str) -> str:
    """The states that show ``action`` done, for people, the one on the way first:
    "stopping or stopped"."""
    order = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")
    return " or ".join(s for s in order if s in DONE_STATES.get(action, ()))


def observable(action: str) -> bool:
    """Whether DescribeInstances can show ``action`` done (not reboot's)."""
    return action in DONE_STATES
