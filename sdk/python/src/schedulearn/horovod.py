"""Progress reporting and state hooks for Horovod elastic training.

Every Horovod process runs the training script, and in elastic mode the
process that is rank 0 changes as workers come and go. :class:`Reporter`
checks the rank at every report, so exactly one process reports, and fills
in the world size::

    import horovod.torch as hvd
    from schedulearn import horovod as sl

    hvd.init()
    reporter = sl.Reporter(hvd)
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    reporter.track(state)    # reports the world size after every reset,
                             # and the step at every commit
    sl.on_sigterm(lambda: save_checkpoint(state), reporter)

    @hvd.elastic.run
    def train(state):
        ...
        reporter.report(state.step, samples_per_sec=..., loss=loss.item())

Horovod is not imported by this module: pass ``horovod.torch`` (or
``horovod.tensorflow``...) as ``hvd``, or leave it out to use
``horovod.torch``.
"""

import logging

from .reporter import Reporter as _Reporter
from .signals import on_sigterm

__all__ = ["Reporter", "commit_if_hosts_updated", "keep_host_updates_across_resets", "on_sigterm"]

log = logging.getLogger("schedulearn")


class Reporter(_Reporter):
    """A :class:`schedulearn.Reporter` for Horovod: reports from the current
    rank 0 only and fills in the world size (``hvd.size()``).

    Every process keeps its own queue and sender, so whichever becomes rank
    0 after a reset reports on; the others' reports are not even queued.
    """

    def __init__(self, hvd=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._hvd = hvd
        self._step_of = None

    @property
    def hvd(self):
        if self._hvd is None:
            import horovod.torch as hvd  # the usual one; imported on first use
            self._hvd = hvd
        return self._hvd

    def _rank_size(self):
        try:
            return self.hvd.rank(), self.hvd.size()
        except Exception:  # not initialised (yet), or mid-reset
            return None, None

    def report(self, step, samples_per_sec=None, loss=None, metric=None, value=None,
               world_size=None, checkpoint=None, batch=None, noise_scale=None):
        if not self.enabled:
            return
        rank, size = self._rank_size()
        if rank != 0:
            return
        if world_size is None:
            world_size = size
        super().report(step, samples_per_sec=samples_per_sec, loss=loss, metric=metric, value=value,
                       world_size=world_size, checkpoint=checkpoint, batch=batch, noise_scale=noise_scale)

    def on_reset(self):
        """A reset callback (``state.register_reset_callbacks``): reports
        the new world size at the state's step (or the last step
        reported)."""
        step = self._current_step()
        if step is not None:
            self.report(step)

    def on_commit(self, state=None):
        """Reports the step of a commit, with the world size."""
        step = self._current_step(state)
        if step is not None:
            self.report(step)

    def track(self, state, step_attr="step"):
        """Hooks a Horovod elastic ``State``: its reset callbacks report the
        new world size, and every ``state.commit()`` reports the step (read
        from ``state.<step_attr>``). It also keeps host updates that arrive
        during a reset (see :func:`keep_host_updates_across_resets`).
        Returns the state."""
        self._step_of = lambda s=state: getattr(s, step_attr, None)
        keep_host_updates_across_resets(state)
        state.register_reset_callbacks([self.on_reset])
        commit = state.commit

        def commit_and_report(*args, **kwargs):
            result = commit(*args, **kwargs)
            try:
                self.on_commit()
            except Exception:
                log.debug("schedulearn: failed to report a commit", exc_info=True)
            return result

        state.commit = commit_and_report
        return state

    def _current_step(self, state=None):
        step = None
        try:
            if state is not None:
                step = getattr(state, "step", None)
            elif self._step_of is not None:
                step = self._step_of()
        except Exception:
            step = None
        return self.last_step if step is None else step


def keep_host_updates_across_resets(state):
    """Makes a Horovod elastic ``State`` keep the host updates that arrive
    while it resets, so that a worker added during a reset joins.

    Horovod's driver tells the coordinator (rank 0) about added hosts once,
    and the coordinator's ``State.on_reset()`` starts a new message queue:
    an update that arrives while the workers re-rendezvous for an earlier
    one (a job grown by two workers whose checks pass a second apart) is
    dropped, and the second worker never joins (Horovod 0.28). With this
    hook the update is kept and, at the next ``commit()``, triggers one
    more reset that takes the worker in. Its timestamp is moved past the
    last one handled, as Horovod's are whole seconds and an update in the
    same second as the last would be ignored. At worst a reset that
    changes nothing (a second or two) follows. Idempotent; returns the
    state.
    """
    if getattr(state, "_schedulearn_keeps_updates", False):
        return state
    on_reset = state.on_reset

    def on_reset_keeping_updates(*args, **kwargs):
        pending = []
        queue = getattr(state, "_host_messages", None)
        try:
            while queue is not None and not queue.empty():
                pending.append(queue.get_nowait())
        except Exception:
            pass
        result = on_reset(*args, **kwargs)
        if pending:
            last = getattr(state, "_last_updated_timestamp", 0)
            for timestamp, update in pending:
                state.on_hosts_updated(max(timestamp, last + 1), update)
            log.info("schedulearn: kept %d host update(s) that arrived during a reset", len(pending))
        return result

    state.on_reset = on_reset_keeping_updates
    state._schedulearn_keeps_updates = True
    return state


def commit_if_hosts_updated(state):
    """Takes a membership change in between commits: call it on every rank
    at the same point of a step (it is a collective). When rank 0 holds a
    host update (Horovod's driver tells only the coordinator), every rank
    commits the state, and the commit raises Horovod's
    ``HostsUpdatedInterrupt``: the workers reset and take the new hosts in
    at this step instead of at the next regular commit. Without an update
    it costs one broadcast of a flag and commits nothing. Returns False when
    nothing was pending.

    Horovod's own ``state.check_host_updates()`` raises without saving,
    and the reset that follows broadcasts the state of the last commit
    (``ObjectState.sync``): the step counter goes back to that commit while
    the model keeps its newer weights.
    """
    queue = getattr(state, "_host_messages", None)
    pending = queue is not None and not queue.empty()
    if not state._bcast_object(pending):
        return False
    state.commit()
    return True
