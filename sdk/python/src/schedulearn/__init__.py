"""Schedulearn's training SDK: report a training job's progress to the
planner, and hooks for elastic training.

    import schedulearn

    reporter = schedulearn.Reporter()   # from SCHEDULEARN_ADDR, _JOB_ID, _REPORT_TOKEN
    for step in range(steps):
        ...
        reporter.report(step, samples_per_sec=rate, loss=loss.item(),
                        metric="accuracy", value=acc)

or, with one reporter for the whole process, ``schedulearn.report(...)``.
Reporting never blocks the training loop and never raises into it; without
SCHEDULEARN_ADDR (training outside the planner) it does nothing. See
:mod:`schedulearn.horovod` and :mod:`schedulearn.torchrun` for the
launchers' helpers, :func:`on_sigterm` to save before a shrink or a
preemption, :func:`resume` for the checkpoint to resume from after one
(or after every worker was lost: it asks the planner too), and
:func:`target` for the jobspec's target (to stop at it).

Batch size that follows the GPUs: report ``batch=`` (the global batch) and
``noise_scale=`` (see :class:`NoiseScale`), and read the planner's advice
with :meth:`Reporter.batch_for`.
"""

import threading

from .gns import NoiseScale, noise_scale
from .reporter import (ENV_ADDR, ENV_JOB_ID, ENV_REPORT_TOKEN, ENV_TARGET_METRIC, ENV_TOKEN,
                       TOKEN_HEADER, BatchAdvice, Reporter)
from .resume import (ENV_RESUME_CHECKPOINT, ENV_RESUME_STEP, PlannerUnavailable, Resume, planner_resume_point,
                     resume)
from .signals import on_sigterm
from .target import ENV_TARGET_DIRECTION, ENV_TARGET_GOAL, BatchSpec, Target, batch_spec, target

__version__ = "0.1.0"

__all__ = ["Reporter", "report", "default_reporter", "BatchAdvice", "noise_scale", "NoiseScale",
           "on_sigterm", "Target", "target", "BatchSpec", "batch_spec", "Resume", "resume",
           "planner_resume_point", "PlannerUnavailable",
           "ENV_RESUME_CHECKPOINT", "ENV_RESUME_STEP", "ENV_ADDR", "ENV_JOB_ID",
           "ENV_REPORT_TOKEN", "ENV_TOKEN", "ENV_TARGET_METRIC", "ENV_TARGET_GOAL", "ENV_TARGET_DIRECTION",
           "TOKEN_HEADER", "__version__"]

_default = None
_default_lock = threading.Lock()


def default_reporter():
    """The process's reporter, made from the environment on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Reporter()
    return _default


def report(step, **kwargs):
    """``default_reporter().report(step, ...)``: queues a report, at once."""
    default_reporter().report(step, **kwargs)
