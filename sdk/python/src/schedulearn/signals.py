"""Save before the planner stops a task.

When the planner shrinks or preempts a job, Nomad sends the task SIGTERM
and gives it a kill timeout (30 s) before SIGKILL. :func:`on_sigterm`
installs a handler that runs a callback (save a checkpoint), reports the
checkpoint and flushes the reporter, and then lets the signal do what it
did before: the previous Python handler runs, or the process dies of the
signal (exit status 143), as if no handler had been installed.

Python runs signal handlers in the main thread between bytecodes: a
handler waits while the main thread is inside a long C call (a collective
that waits for a peer that is gone); keep the callback short.
"""

import logging
import os
import signal
import threading

__all__ = ["on_sigterm"]

log = logging.getLogger("schedulearn")


def on_sigterm(callback=None, reporter=None, *, flush_timeout=5.0, signum=signal.SIGTERM):
    """Installs a SIGTERM handler that saves and then terminates.

    Args:
        callback: called with no arguments first; it saves (commits the
            elastic state, writes a checkpoint) and may return the
            checkpoint's path, which is reported. Its exceptions are logged
            and do not stop the termination.
        reporter: a :class:`~schedulearn.Reporter` (or anything with
            ``report`` and ``flush``) to report the checkpoint with, at the
            last reported step, and to flush for at most ``flush_timeout``.
        signum: the signal (SIGTERM).

    Returns the previous handler. Must be called from the main thread.
    """
    previous = signal.getsignal(signum)
    fired = threading.Event()

    def handler(sig, frame):
        if fired.is_set():
            return  # a second SIGTERM while saving: the first one finishes
        fired.set()
        try:
            path = callback() if callback is not None else None
            if reporter is not None:
                if path:
                    step = getattr(reporter, "last_step", None) or 0
                    reporter.report(step, checkpoint=os.fspath(path))
                reporter.flush(flush_timeout)
        except Exception:
            log.exception("schedulearn: the SIGTERM callback failed; terminating anyway")
        finally:
            _redeliver(sig, frame, previous)

    signal.signal(signum, handler)
    return previous


def _redeliver(sig, frame, previous):
    """Does what the signal did before the handler was installed."""
    if callable(previous):
        signal.signal(sig, previous)
        previous(sig, frame)
        return
    if previous == signal.SIG_IGN:
        return
    # SIG_DFL (or None: set outside Python): die of the signal.
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
