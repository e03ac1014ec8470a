"""The job's target, as the planner passes it: which metric, what goal, and
which way is better, so that a training script can stop at the goal.

    t = schedulearn.target()           # None outside the planner or without one
    ...
    if t is not None and t.reached("accuracy", acc):
        save_and_report_checkpoint()
        break
"""

import math
import os
from dataclasses import dataclass

#: The target's goal (a number) and direction ("max": higher is better,
#: the default; "min": lower is better, e.g. a loss).
ENV_TARGET_GOAL = "SCHEDULEARN_TARGET_GOAL"
ENV_TARGET_DIRECTION = "SCHEDULEARN_TARGET_DIRECTION"
_ENV_TARGET_METRIC = "SCHEDULEARN_TARGET_METRIC"


@dataclass(frozen=True)
class Target:
    """A metric's goal; ``lower`` when lower values are better."""

    metric: str
    goal: float
    lower: bool = False

    def reached(self, metric, value):
        """Whether ``value`` of ``metric`` is at or past the goal (False for
        another metric, or a value that is not a finite number)."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            return False
        if metric != self.metric or not math.isfinite(v):
            return False
        return v <= self.goal if self.lower else v >= self.goal


def target(environ=None):
    """The job's target from the environment the planner set, or None when
    there is none or it cannot be read (a script then trains as it would
    without one)."""
    env = os.environ if environ is None else environ
    metric = env.get(_ENV_TARGET_METRIC, "")
    try:
        goal = float(env.get(ENV_TARGET_GOAL, ""))
    except ValueError:
        return None
    direction = env.get(ENV_TARGET_DIRECTION, "max")
    if not metric or not math.isfinite(goal) or direction not in ("max", "min"):
        return None
    return Target(metric, goal, direction == "min")
