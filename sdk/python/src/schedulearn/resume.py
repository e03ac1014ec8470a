"""Where a preempted job resumes: the planner's word on restart.

When the planner stops a job to give its GPUs back to another queue, the
job gets SIGTERM first (see :func:`schedulearn.on_sigterm`: save and report
the checkpoint) and is requeued. When it starts again, the planner passes
the last checkpoint the job reported (if it lies in the planner's
``checkpoint_dirs``) and its step in the environment; every worker reads
them here:

    r = schedulearn.resume()        # None: a first start, or start over
    if r is not None:
        model.load_state_dict(torch.load(r.checkpoint))
        step = r.step
"""

import os
from dataclasses import dataclass

#: The checkpoint's path and its step.
ENV_RESUME_CHECKPOINT = "SCHEDULEARN_RESUME_CHECKPOINT"
ENV_RESUME_STEP = "SCHEDULEARN_RESUME_STEP"


@dataclass(frozen=True)
class Resume:
    """A checkpoint to resume from, written at ``step``."""

    checkpoint: str
    step: int


def resume(environ=None):
    """The checkpoint the planner says to resume from, or None: none is
    set, the step is not a whole number above 0, the path is not
    absolute, or the file is not there (then the script starts over)."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_RESUME_CHECKPOINT, "")
    try:
        step = int(env.get(ENV_RESUME_STEP, ""))
    except ValueError:
        return None
    if not path or step <= 0 or not os.path.isabs(path) or not os.path.isfile(path):
        return None
    return Resume(path, step)
