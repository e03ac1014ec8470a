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
