import os
import signal
import subprocess
import sys
import textwrap

import schedulearn
from conftest import free_port

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _script(code, env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ, PYTHONPATH=SRC, **env),
                          capture_output=True, text=True, timeout=30)


def test_sigterm_saves_reports_and_dies_of_the_signal(clean_env, planner, tmp_path):
    saved = tmp_path / "ckpt.pt"
    p = _script("""
        import os, signal, sys, time
        import schedulearn
        r = schedulearn.Reporter(interval=60)
        r.report(41, loss=0.5)

        def save():
            open(sys.argv[1] if len(sys.argv) > 1 else %r, "w").write("state")
            return %r

        schedulearn.on_sigterm(save, r)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        print("not reached")
    """ % (str(saved), str(saved)), {schedulearn.ENV_ADDR: planner.addr, schedulearn.ENV_JOB_ID: "job",
                                     schedulearn.ENV_REPORT_TOKEN: "t"})
    assert p.returncode == -signal.SIGTERM, (p.returncode, p.stderr)
    assert "not reached" not in p.stdout
    assert saved.read_text() == "state"
    reports = planner.reports()
    assert [x["step"] for x in reports] == [41, 41]
    assert reports[-1]["checkpoint"] == str(saved)


def test_sigterm_callback_failure_still_terminates(clean_env):
    p = _script("""
        import os, signal, time
        import schedulearn
        def save():
            raise RuntimeError("disk full")
        schedulearn.on_sigterm(save, schedulearn.Reporter())
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    """, {schedulearn.ENV_ADDR: "127.0.0.1:%d" % free_port(), schedulearn.ENV_JOB_ID: "job"})
    assert p.returncode == -signal.SIGTERM
    assert "disk full" in p.stderr


def test_sigterm_chains_to_the_previous_handler(clean_env):
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: calls.append("previous"))
    try:
        before = schedulearn.on_sigterm(lambda: calls.append("save"))
        assert callable(before)
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["save", "previous"]
        # The previous handler is back in place.
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["save", "previous", "previous"]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_flush_from_a_handler_that_interrupted_report(clean_env, planner, reporters):
    # A SIGTERM handler runs in the main thread between bytecodes, possibly
    # while report() holds the reporter's lock: its report and flush must
    # not deadlock.
    r = reporters(planner.addr, "job", "t", interval=60)
    r.report(1)
    with r._lock:
        r.report(2, checkpoint="/ckpt")
        assert r.flush(5)
    assert [x["step"] for x in planner.reports()] == [1, 2]


# The main thread blocked in C (pthread_mutex_lock, which no signal
# interrupts, as a Gloo collective waiting for a peer is): Python's
# handler cannot run until it returns. HOLDER holds the mutex until the
# save has run, or for at most 20 s.
_BLOCKED_IN_C = """
    import ctypes, os, signal, sys, threading, time
    import schedulearn
    libc = ctypes.CDLL("libc.so.6")
    mu = ctypes.create_string_buffer(64)
    libc.pthread_mutex_init(mu, None)
    held, saved, released, lock = threading.Event(), threading.Event(), threading.Event(), threading.Lock()
    r = schedulearn.Reporter(interval=60)
    r.report(7)

    def save():
        open(%(out)r, "w").write("blocked=%%s" %% (not released.is_set()))
        saved.set()
        return %(out)r

    def holder():
        libc.pthread_mutex_lock(mu)
        held.set()
        saved.wait(%(hold)s)
        released.set()
        libc.pthread_mutex_unlock(mu)

    schedulearn.on_sigterm(save, r, lock=lock)
    threading.Thread(target=holder, daemon=True).start()
    held.wait()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    libc.pthread_mutex_lock(mu)
    time.sleep(10)
    print("not reached")
"""


def _planner_env(planner):
    return {schedulearn.ENV_ADDR: planner.addr, schedulearn.ENV_JOB_ID: "job", schedulearn.ENV_REPORT_TOKEN: "t"}


def test_sigterm_with_a_lock_saves_while_the_main_thread_is_stuck_in_c(clean_env, planner, tmp_path):
    out = tmp_path / "ckpt.pt"
    p = _script(_BLOCKED_IN_C % {"out": str(out), "hold": 20}, _planner_env(planner))
    assert p.returncode == -signal.SIGTERM, (p.returncode, p.stderr)
    assert "not reached" not in p.stdout
    # Saved while the main thread was still blocked, then died of the signal
    # once it came back.
    assert out.read_text() == "blocked=True"
    assert planner.reports()[-1]["checkpoint"] == str(out)


def test_sigterm_with_a_lock_exits_when_the_main_thread_never_comes_back(clean_env, planner, tmp_path):
    out = tmp_path / "ckpt.pt"
    # The mutex is never given back: the thread saves, reports and exits
    # the process itself, 128 + SIGTERM, as a shell reports a death by it.
    p = _script(_BLOCKED_IN_C.replace("saved.wait(%(hold)s)", "time.sleep(600)") % {"out": str(out)},
                _planner_env(planner))
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, p.stderr)
    assert out.read_text() == "blocked=True"
    assert planner.reports()[-1]["checkpoint"] == str(out)


def test_sigterm_with_a_lock_the_main_thread_holds(clean_env, planner, tmp_path):
    out = tmp_path / "ckpt.pt"
    # The signal comes while the main thread holds the lock (its handler
    # runs there): no deadlock; the save waits for the lock, then the
    # process dies of the signal.
    p = _script("""
        import os, signal, threading, time
        import schedulearn
        lock, steps = threading.Lock(), {"n": 0}
        r = schedulearn.Reporter(interval=60)

        def save():
            open(%r, "w").write("step=%%d" %% steps["n"])
            return %r

        schedulearn.on_sigterm(save, r, lock=lock)
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        for _ in range(200):
            with lock:
                steps["n"] += 1
                time.sleep(0.05)
        print("not reached")
    """ % (str(out), str(out)), _planner_env(planner))
    assert p.returncode == -signal.SIGTERM, (p.returncode, p.stderr)
    assert "not reached" not in p.stdout
    assert out.read_text().startswith("step=")
    assert planner.reports()[-1]["checkpoint"] == str(out)
