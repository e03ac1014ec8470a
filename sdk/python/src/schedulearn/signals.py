"""Save before the planner stops a task.

When the planner shrinks or preempts a job, Nomad sends the task SIGTERM
and gives it a kill timeout (30 s) before SIGKILL. :func:`on_sigterm`
installs a handler that runs a callback (save a checkpoint), reports the
checkpoint and flushes the reporter, and then lets the signal do what it
did before: the previous Python handler runs, or the process dies of the
signal (exit status 143), as if no handler had been installed.

Python runs signal handlers in the main thread between bytecodes: a
handler waits while the main thread is inside a long C call, such as a
collective (Gloo's allreduce) waiting for a peer that is stopping too.
When the peer dies first, the collective fails, the main thread unwinds
with that error, and the handler may never save. Pass ``lock`` (the lock
your training loop holds while it changes the state the callback saves)
and the callback runs at once in a thread the signal wakes, under that
lock, whatever the main thread is doing; the process still ends as
above once the callback and the flush are done.
"""

import atexit
import logging
import os
import signal
import socket
import threading

__all__ = ["on_sigterm"]

log = logging.getLogger("schedulearn")


def on_sigterm(callback=None, reporter=None, *, flush_timeout=5.0, signum=signal.SIGTERM, lock=None):
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
        lock: a lock the training loop holds while it changes what the
            callback saves (a step of the optimizer and its step counter;
            never while it waits in a collective). With one, the callback
            runs in a thread the signal wakes (Python's wakeup fd), under
            the lock, even while the main thread is stuck in C; without
            one, in the main thread's handler. The wakeup fd is the
            process's only one: when something else holds it (an asyncio
            loop), the callback runs in the main thread's handler.

    Returns the previous handler. Must be called from the main thread.
    """
    previous = signal.getsignal(signum)
    fired = threading.Event()
    done = threading.Event()

    def save():
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
            done.set()

    woken = _wake_thread(signum, lock, fired, done, save) if lock is not None else False

    def handler(sig, frame):
        if woken:
            # The thread saves under the lock (which this thread may hold
            # now: do not wait here) and signals again when it is done.
            if done.is_set():
                _redeliver(sig, frame, previous)
            return
        if fired.is_set():
            return  # a second SIGTERM while saving: the first one finishes
        fired.set()
        save()
        _redeliver(sig, frame, previous)

    signal.signal(signum, handler)
    if woken:
        # The main thread may unwind (its collective failed as the peers
        # stopped) and exit before its handler runs: the interpreter's exit
        # waits for a save under way.
        atexit.register(lambda: fired.is_set() and done.wait(flush_timeout + _SAVE_BUDGET))
    return previous


#: How long a save may take before the process exits without it.
_SAVE_BUDGET = 30.0

#: How long the thread, done, waits for the main thread's handler to end
#: the process before it exits itself (the main thread is stuck in C).
_END_GRACE = 5.0


def _wake_thread(signum, lock, fired, done, save):
    """Starts the thread that runs save under lock when signum arrives
    (the signal's byte on Python's wakeup fd), then sends the signal again
    for the main thread's handler to end the process as the signal would,
    or, if the main thread does not come back from C within _END_GRACE,
    exits with 128 + signum. False when the wakeup fd is taken already:
    then the main thread's handler saves."""
    r, w = socket.socketpair()
    w.setblocking(False)
    try:
        old = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        r.close()
        w.close()
        return False
    if old != -1:
        signal.set_wakeup_fd(old)
        r.close()
        w.close()
        return False

    def run():
        while True:
            try:
                data = r.recv(64)
            except OSError:
                return
            if not data:
                return
            if signum in data and not fired.is_set():
                fired.set()
                with lock:
                    save()
                os.kill(os.getpid(), signum)
                if not _main_ended.wait(_END_GRACE):
                    os._exit(128 + signum)

    # Kept alive with the thread (the wakeup fd must stay open).
    t = threading.Thread(target=run, name="schedulearn-sigterm", daemon=True)
    t._schedulearn_fds = (r, w)
    t.start()
    return True


#: Set when the main thread's handler passes the signal on.
_main_ended = threading.Event()


def _redeliver(sig, frame, previous):
    """Does what the signal did before the handler was installed."""
    _main_ended.set()
    if callable(previous):
        signal.signal(sig, previous)
        previous(sig, frame)
        return
    if previous == signal.SIG_IGN:
        return
    # SIG_DFL (or None: set outside Python): die of the signal.
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
