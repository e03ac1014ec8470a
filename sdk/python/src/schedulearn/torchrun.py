"""Progress reporting for torchrun (launcher = "torchrun").

torchrun starts ``--nproc-per-node`` processes per node and restarts all of
them on every membership change, with RANK and WORLD_SIZE in their
environment. Only rank 0 should report:

    from schedulearn import torchrun as sl

    reporter = sl.Reporter()             # a no-op on ranks other than 0
    for step in ...:
        reporter.report(step, samples_per_sec=..., loss=loss.item())

The world size is filled in from WORLD_SIZE.
"""

import os

from .reporter import Reporter as _Reporter
from .signals import on_sigterm

__all__ = ["Reporter", "rank", "world_size", "is_rank_zero", "on_sigterm"]


def _env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def rank():
    """This process's global rank ($RANK; 0 outside torchrun)."""
    return _env_int("RANK", 0)


def world_size():
    """The number of processes ($WORLD_SIZE; 1 outside torchrun)."""
    return _env_int("WORLD_SIZE", 1)


def is_rank_zero():
    return rank() == 0


class Reporter(_Reporter):
    """A :class:`schedulearn.Reporter` that reports from rank 0 only (it is
    a no-op elsewhere: no thread, no network) and fills in the world size."""

    def __init__(self, *args, enabled=True, **kwargs):
        super().__init__(*args, enabled=enabled and is_rank_zero(), **kwargs)
        self.world_size = world_size()

    def report(self, step, samples_per_sec=None, loss=None, metric=None, value=None,
               world_size=None, checkpoint=None, batch=None, noise_scale=None):
        if world_size is None:
            world_size = self.world_size
        super().report(step, samples_per_sec=samples_per_sec, loss=loss, metric=metric, value=value,
                       world_size=world_size, checkpoint=checkpoint, batch=batch, noise_scale=noise_scale)
