"""The job's target, as the planner passes it: which metric, what goal, and
which way is better, so that a training script can stop at the goal; and
the jobspec's batch block (:func:`batch_spec`).

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


#: The jobspec's batch block: the global batch the script is tuned at, the
#: largest it can train at, the most samples a GPU holds in a micro-batch.
ENV_BATCH_SIZE = "SCHEDULEARN_BATCH_SIZE"
ENV_BATCH_MAX = "SCHEDULEARN_BATCH_MAX"
ENV_BATCH_MAX_PER_GPU = "SCHEDULEARN_BATCH_MAX_PER_GPU"


@dataclass(frozen=True)
class BatchSpec:
    """The jobspec's batch block, in samples per optimizer step."""

    size: int
    max: int
    max_per_gpu: int


def batch_spec(environ=None):
    """The jobspec's batch block from the environment the planner set, or
    None when the jobspec has none (the planner then advises no batch) or
    it cannot be read."""
    env = os.environ if environ is None else environ
    try:
        size, most, per_gpu = (int(env.get(k, "")) for k in (ENV_BATCH_SIZE, ENV_BATCH_MAX, ENV_BATCH_MAX_PER_GPU))
    except ValueError:
        return None
    if not (1 <= size <= most) or per_gpu < 1:
        return None
    return BatchSpec(size, most, per_gpu)
