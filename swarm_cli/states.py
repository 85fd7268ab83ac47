"""EC2's instance states that are on the way to others, and what that means for an action.

An instance takes tens of seconds to stop or start: ``stopping`` on its way to
``stopped``, ``pending`` to ``running``. EC2 refuses a start of one still stopping, and
a stop of one still pending (IncorrectInstanceState), only until it gets there.
"""

from __future__ import annotations

# The state an instance passes through on its way to each action's end state.
ON_ITS_WAY_TO = {"stopped": "stopping", "running": "pending", "terminated": "shutting-down"}
# The states on the way that end where an action applies again, and where they end.
PASSING_TO = {"stopping": "stopped", "pending": "running"}
# For each action, the state on the way in which EC2 refuses it until the instance is there.
REFUSED_ON_THE_WAY = {"start": "stopping", "stop": "pending"}
# EC2's code for an action refused in the instance's state.
INCORRECT_STATE = "IncorrectInstanceState"
