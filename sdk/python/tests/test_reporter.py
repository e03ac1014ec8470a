import datetime
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time

import schedulearn
from conftest import FakePlanner, free_port

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def test_noop_without_address_or_job_id(clean_env, planner, reporters):
    r = reporters()
    assert not r.enabled and r.url == "" and r._thread is None
    r.report(1, loss=0.5)
    assert r.pending() == 0
    assert r.flush(0.1)
    assert r.close()

    # An address alone (the CLI's SCHEDULEARN_ADDR in a user's shell) is
    # not enough: training outside the planner has no job ID.
    clean_env.setenv(schedulearn.ENV_ADDR, planner.addr)
    clean_env.setenv(schedulearn.ENV_TOKEN, "admin")
    r = reporters()
    assert not r.enabled
    r.report(1)
    r.close()
    assert planner.requests == []


def test_module_report_is_noop_outside_planner(clean_env):
    schedulearn._default = None
    schedulearn.report(3, loss=1.0)
    assert not schedulearn.default_reporter().enabled


def test_environment_and_token_header(clean_env, planner, reporters):
    clean_env.setenv(schedulearn.ENV_ADDR, planner.addr + "/")
    clean_env.setenv(schedulearn.ENV_JOB_ID, "resnet-1a2b")
    clean_env.setenv(schedulearn.ENV_REPORT_TOKEN, "job-token")
    clean_env.setenv(schedulearn.ENV_TOKEN, "admin-token")
    clean_env.setenv(schedulearn.ENV_TARGET_METRIC, "accuracy")
    r = reporters(interval=60)
    assert r.enabled
    assert r.url == planner.addr + "/v1/jobs/resnet-1a2b/progress"
    before = datetime.datetime.now(datetime.timezone.utc)
    r.report(7, samples_per_sec=512, loss=0.25, value=0.5, world_size=4, checkpoint="/ckpt/7.pt")
    r.report(8, metric="top5", value=0.9)
    assert r.flush(5)
    (path, headers, body), = planner.requests
    assert path == "/v1/jobs/resnet-1a2b/progress"
    assert headers["X-Schedulearn-Token"] == "job-token"
    assert headers["Content-Type"] == "application/json"
    first, second = body
    t = datetime.datetime.fromisoformat(first.pop("time"))
    assert t.tzinfo is not None and abs((t - before).total_seconds()) < 5
    assert first == {"step": 7, "samples_per_sec": 512.0, "loss": 0.25,
                     "metric": {"name": "accuracy", "value": 0.5}, "world_size": 4, "checkpoint": "/ckpt/7.pt"}
    second.pop("time")
    assert second == {"step": 8, "metric": {"name": "top5", "value": 0.9}}
    assert r.sent == 2 and r.dropped == 0 and r.last_step == 8

    # Without a report token, the planner's token.
    clean_env.delenv(schedulearn.ENV_REPORT_TOKEN)
    r2 = reporters(interval=60)
    r2.report(9)
    assert r2.flush(5)
    assert planner.requests[-1][1]["X-Schedulearn-Token"] == "admin-token"


def test_batches_by_size_and_by_interval(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", batch_size=5, interval=60)
    for step in range(12):
        r.report(step)
    # Two full batches go at once, without waiting for the interval.
    assert planner.wait_for(10, timeout=5)
    time.sleep(0.2)
    assert [len(b) for b in planner.batches()] == [5, 5]
    assert r.pending() == 2
    assert r.flush(5)
    assert [len(b) for b in planner.batches()] == [5, 5, 2]
    assert [x["step"] for x in planner.reports()] == list(range(12))

    # A trickle goes out every interval, as one batch.
    r2 = reporters(planner.addr, "job", "t", batch_size=100, interval=0.3)
    for step in range(3):
        r2.report(step)
    assert planner.wait_for(15, timeout=5)
    assert [len(b) for b in planner.batches()][-1] == 3


def _timings(r, n=2000):
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        r.report(i, samples_per_sec=100.0, loss=1.0 / (i + 1), metric="accuracy", value=0.5, world_size=2)
        out.append(time.perf_counter() - t0)
    return out


def test_report_never_blocks_when_planner_down(clean_env, reporters):
    # Nobody listens: every connection is refused.
    r = reporters("127.0.0.1:%d" % free_port(), "job", "t", batch_size=10, interval=0.05, max_pending=100)
    times = _timings(r)
    assert statistics.median(times) < 1e-3, statistics.median(times)
    assert statistics.mean(times) < 1e-3, statistics.mean(times)
    assert r.pending() <= 100


def test_report_never_blocks_when_planner_hangs(clean_env, reporters):
    # A planner that accepts connections and never answers: every request
    # runs into the timeout.
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(100)
        r = reporters("127.0.0.1:%d" % hole.getsockname()[1], "job", "t", batch_size=10, interval=0.05,
                      timeout=0.5, max_pending=100)
        times = _timings(r)
        assert statistics.median(times) < 1e-3, statistics.median(times)
        assert statistics.mean(times) < 1e-3, statistics.mean(times)
        assert r.pending() <= 100
        t0 = time.monotonic()
        assert not r.flush(0.3)
        assert time.monotonic() - t0 < 2


def test_planner_down_then_up(clean_env, reporters):
    port = free_port()
    r = reporters("http://127.0.0.1:%d" % port, "job", "t", batch_size=20, interval=0.05, max_pending=50)
    for step in range(200):
        r.report(step)  # no exception, whatever the sender does
    time.sleep(0.3)  # a few failed attempts
    assert r.pending() == 50, "the queue is bounded"
    assert r.dropped == 150, "the oldest went"
    assert not r.flush(0.3)

    planner = FakePlanner(port)
    try:
        assert r.flush(10), "delivered once the planner is back"
        assert [x["step"] for x in planner.reports()] == list(range(150, 200))
        assert r.sent == 50 and r.pending() == 0
        r.report(200)
        assert r.flush(5)
        assert planner.reports()[-1]["step"] == 200
    finally:
        planner.stop()


def test_unconfirmed_checkpoints(clean_env, planner, reporters, tmp_path):
    # The checkpoints of reports queued or sent without an answer: the
    # planner may yet record one of them as the resume point.
    r = reporters(planner.addr, "job", "t", interval=60)
    assert r.unconfirmed_checkpoints() == []
    r.report(10, checkpoint=str(tmp_path / "a-10.pt"))
    r.report(11)
    r.report(20, checkpoint=str(tmp_path / "a-20.pt"))
    assert r.unconfirmed_checkpoints() == [str(tmp_path / "a-10.pt"), str(tmp_path / "a-20.pt")]
    planner.lose = 1  # recorded, its answer lost: kept, and sent again
    planner.codes = [503] * 10
    assert not r.flush(0.5)
    assert r.unconfirmed_checkpoints() == [str(tmp_path / "a-10.pt"), str(tmp_path / "a-20.pt")]
    planner.codes = []
    assert r.flush(10)
    assert r.unconfirmed_checkpoints() == []
    planner.codes = [400]  # refused: not to be recorded
    r.report(30, checkpoint=str(tmp_path / "a-30.pt"))
    assert r.flush(5)
    assert r.unconfirmed_checkpoints() == []


def test_unconfirmed_includes_the_batch_in_flight(clean_env, reporters, tmp_path):
    # A planner that takes the request and has not answered yet (it may
    # record it): the batch stays unconfirmed though the queue, overflowing
    # meanwhile, dropped its reports.
    a10 = str(tmp_path / "a-10.pt")
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(10)
        r = reporters("127.0.0.1:%d" % hole.getsockname()[1], "job", "t", batch_size=2, interval=0.05,
                      timeout=5, max_pending=2)
        r.report(10, checkpoint=a10)
        r.report(11)  # a full batch: sent at once
        time.sleep(0.5)
        for s in range(12, 20):
            r.report(s)
        assert r.dropped >= 2, "the queue dropped the batch in flight"
        assert r.unconfirmed_checkpoints() == [a10]


def test_5xx_and_409_are_retried(clean_env, planner, reporters):
    planner.codes = [503, 500, 409]
    r = reporters(planner.addr, "job", "t", interval=60)
    r.report(1)
    r.report(2)
    assert r.flush(10)
    assert [x["step"] for x in planner.reports()] == [1, 2]
    assert r.sent == 2 and r.dropped == 0


def test_refusals(clean_env, planner, reporters):
    # A refused batch (400) is dropped; reporting goes on.
    planner.codes = [400]
    r = reporters(planner.addr, "job", "t", interval=60)
    r.report(1)
    assert r.flush(5)
    r.report(2)
    assert r.flush(5)
    assert [x["step"] for x in planner.reports()] == [2]
    assert r.dropped == 1 and r.enabled

    # No such job, or a token not good for it: reporting stops for good.
    planner.codes = [403]
    r = reporters(planner.addr, "job", "t", interval=60)
    r.report(3)
    assert r.flush(5)
    assert not r.enabled
    r.report(4)
    assert r.pending() == 0
    assert [x["step"] for x in planner.reports()] == [2]


def test_bad_values_never_raise(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    r.report(-1)  # dropped: the planner refuses negative steps
    r.report("seven")  # dropped
    r.report(object())
    r.report(1, samples_per_sec=float("nan"), loss=float("inf"), value=object(), world_size="x")
    r.report(2, samples_per_sec=-5, loss=float("nan"), metric="acc", value=float("nan"))
    r.report(3.0, loss=1)
    # Throughputs the planner refuses (N7): left out, the report kept.
    r.report(4, samples_per_sec=2.56e-305)
    r.report(5, samples_per_sec=1e13)
    r.report(6, samples_per_sec=0)
    # Values beyond the planner's bound (N8): left out too.
    r.report(7, loss=1e31, value=-1e308)
    # A metric name the planner refuses (N6): the metric left out.
    r.report(8, metric="acc\x1b[2J", value=0.5)
    r.report(9, metric="acc\u202e", value=0.5)
    assert r.flush(5)
    assert [{k: v for k, v in x.items() if k != "time"} for x in planner.reports()] == [
        {"step": 1}, {"step": 2}, {"step": 3, "loss": 1.0}, {"step": 4}, {"step": 5},
        {"step": 6, "samples_per_sec": 0.0}, {"step": 7}, {"step": 8}, {"step": 9}]


def test_close(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    with r:
        r.report(1)
    assert not r.enabled
    r.report(2)
    assert [x["step"] for x in planner.reports()] == [1]
    assert not r._thread.is_alive()


def _run_script(code, env, timeout=30):
    env = dict(os.environ, PYTHONPATH=SRC, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, timeout=timeout,
                          capture_output=True, text=True)


def test_reports_go_out_at_exit(clean_env, planner):
    p = _run_script("""
        import schedulearn
        r = schedulearn.Reporter(interval=60)
        for step in range(5):
            r.report(step)
        schedulearn.report(5)  # the default reporter
    """, {schedulearn.ENV_ADDR: planner.addr, schedulearn.ENV_JOB_ID: "job", schedulearn.ENV_REPORT_TOKEN: "t"})
    assert p.returncode == 0, p.stderr
    assert sorted(x["step"] for x in planner.reports()) == [0, 1, 2, 3, 4, 5]


def test_exit_is_not_held_up_by_a_dead_planner(clean_env):
    t0 = time.monotonic()
    p = _run_script("""
        import schedulearn
        r = schedulearn.Reporter(interval=60, exit_timeout=0.5)
        r.report(1)
    """, {schedulearn.ENV_ADDR: "127.0.0.1:%d" % free_port(), schedulearn.ENV_JOB_ID: "job"})
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t0 < 10
    assert "Traceback" not in p.stderr


def test_thread_safe(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", batch_size=25, interval=0.05, max_pending=10000)

    def work(base):
        for i in range(250):
            r.report(base + i)

    threads = [threading.Thread(target=work, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.flush(10)
    assert len(planner.reports()) == 1000
    assert r.sent == 1000
