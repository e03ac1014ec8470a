import importlib
import os
import queue
import subprocess
import sys
import textwrap

import pytest

from schedulearn import horovod as sl_horovod
from schedulearn import torchrun as sl_torchrun

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _steps(planner):
    return [{k: v for k, v in x.items() if k != "time"} for x in planner.reports()]


def test_torchrun_reports_from_rank_zero_only(clean_env, planner, reporters):
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "4")
    r = reporters(planner.addr, "job", "t", interval=60, cls=sl_torchrun.Reporter)
    assert not r.enabled and r._thread is None
    r.report(1)
    assert r.flush(1)

    clean_env.setenv("RANK", "0")
    r = reporters(planner.addr, "job", "t", interval=60, cls=sl_torchrun.Reporter)
    assert sl_torchrun.is_rank_zero() and sl_torchrun.world_size() == 4
    r.report(2, loss=0.5)
    r.report(3, world_size=2)
    assert r.flush(5)
    assert _steps(planner) == [{"step": 2, "loss": 0.5, "world_size": 4}, {"step": 3, "world_size": 2}]


class FakeHvd:
    def __init__(self):
        self._rank, self._size = 0, 2

    def rank(self):
        return self._rank

    def size(self):
        return self._size


class FakeState:
    """The parts of horovod.common.elastic.State the helper uses."""

    def __init__(self):
        self.step = 0
        self.commits = 0
        self.reset_callbacks = []
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0

    def on_hosts_updated(self, timestamp, update):
        self._host_messages.put((timestamp, update))

    def register_reset_callbacks(self, callbacks):
        self.reset_callbacks.extend(callbacks)

    def commit(self):
        self.commits += 1

    def on_reset(self):
        self._host_messages = queue.Queue()
        for cb in self.reset_callbacks:
            cb()


def test_horovod_rank_zero_world_size_commit_and_reset(clean_env, planner, reporters):
    hvd = FakeHvd()
    r = reporters(hvd, planner.addr, "job", "t", interval=60, cls=sl_horovod.Reporter)
    state = r.track(FakeState())

    state.step = 5
    r.report(state.step, loss=1.5)  # world size filled in
    state.commit()  # reports the step
    assert state.commits == 1

    hvd._size = 4  # a worker joined: Horovod resets, then calls back
    state.on_reset()

    hvd._rank = 1  # another process is rank 0 now: this one is silent
    state.step = 6
    r.report(6)
    state.commit()
    assert state.commits == 2
    assert r.flush(5)
    assert _steps(planner) == [
        {"step": 5, "loss": 1.5, "world_size": 2},
        {"step": 5, "world_size": 2},
        {"step": 5, "world_size": 4},
    ]


def test_launcher_reporters_pass_batch_and_noise_scale(clean_env, planner, reporters):
    advice = {"batch": {"size": 256, "per_gpu": 64, "accumulation": 2, "gpus": 2}}
    planner.replies = [advice]
    r = reporters(FakeHvd(), planner.addr, "job", "t", interval=60, cls=sl_horovod.Reporter)
    r.report(1, batch=128, noise_scale=40.0)
    assert r.flush(5)
    assert r.batch_for(2, None) == (256, 64, 2)

    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "2")
    planner.replies = [advice]
    r = reporters(planner.addr, "job", "t", interval=60, cls=sl_torchrun.Reporter)
    r.report(2, batch=256, noise_scale=41.0)
    assert r.flush(5)
    assert r.batch_for(sl_torchrun.world_size(), None) == (256, 64, 2)
    assert _steps(planner) == [{"step": 1, "world_size": 2, "batch_size": 128, "noise_scale": 40.0},
                               {"step": 2, "world_size": 2, "batch_size": 256, "noise_scale": 41.0}]


def test_horovod_not_initialised_is_silent(clean_env, planner, reporters):
    class Uninitialised:
        def rank(self):
            raise ValueError("Horovod has not been initialized; use hvd.init().")

        size = rank

    r = reporters(Uninitialised(), planner.addr, "job", "t", interval=60, cls=sl_horovod.Reporter)
    r.report(1)
    assert r.pending() == 0


def test_horovod_real_elastic_state(clean_env, planner):
    """With the real horovod.torch (when installed): one process, hvd.init(),
    a TorchState tracked through commits."""
    pytest.importorskip("torch")
    try:
        importlib.import_module("horovod.torch")
    except Exception as e:  # not installed, or built without torch
        pytest.skip("horovod.torch: %s" % e)
    code = textwrap.dedent("""
        import torch
        import horovod.torch as hvd
        from schedulearn import horovod as sl
        hvd.init()
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        reporter = sl.Reporter(hvd, interval=60)
        state = reporter.track(hvd.elastic.TorchState(model, opt, step=0))
        for _ in range(3):
            state.step += 1
            reporter.report(state.step, samples_per_sec=10.0)
        state.commit()
        assert reporter.flush(10)
    """)
    env = dict(os.environ, PYTHONPATH=SRC, SCHEDULEARN_ADDR=planner.addr, SCHEDULEARN_JOB_ID="job",
               SCHEDULEARN_REPORT_TOKEN="t")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert _steps(planner) == [
        {"step": 1, "samples_per_sec": 10.0, "world_size": 1},
        {"step": 2, "samples_per_sec": 10.0, "world_size": 1},
        {"step": 3, "samples_per_sec": 10.0, "world_size": 1},
        {"step": 3, "world_size": 1},
    ]


def test_host_updates_that_arrive_during_a_reset_are_kept():
    """Horovod's coordinator drops a host update that arrives while it
    resets (its on_reset starts a new queue): a second worker added a
    second after the first never joins. The hook keeps it for the next
    commit, even when its timestamp is the same second as the last."""
    elastic = pytest.importorskip("horovod.common.elastic")
    from horovod.common.exceptions import HostsUpdatedInterrupt
    from horovod.runner.elastic.worker import HostUpdateResult

    def fresh():
        return elastic.ObjectState(bcast_object=lambda x: x, get_rank=lambda: 0, step=0)

    def grow_twice(state):
        state.on_hosts_updated(100, HostUpdateResult.added)  # the first worker
        with pytest.raises(HostsUpdatedInterrupt):
            state.commit()
        state.on_hosts_updated(100, HostUpdateResult.added)  # the second, while resetting
        state.on_reset()

    plain = fresh()
    grow_twice(plain)
    plain.commit()  # Horovod 0.28 alone: the second update is lost

    kept = sl_horovod.keep_host_updates_across_resets(fresh())
    assert sl_horovod.keep_host_updates_across_resets(kept) is kept  # idempotent
    grow_twice(kept)
    with pytest.raises(HostsUpdatedInterrupt):
        kept.commit()
    kept.on_reset()
    kept.commit()  # handled once, then quiet


def test_commit_if_hosts_updated_keeps_the_step():
    """A host update taken between commits commits first: the reset's sync
    keeps this step. Horovod's own check_host_updates() would take the
    state back to the last commit's step."""
    elastic = pytest.importorskip("horovod.common.elastic")
    from horovod.common.exceptions import HostsUpdatedInterrupt
    from horovod.runner.elastic.worker import HostUpdateResult

    def at_step_8_with_update(update=True):
        state = elastic.ObjectState(bcast_object=lambda x: x, get_rank=lambda: 0, step=5)
        state.commit()
        state.step = 8
        if update:
            state.on_hosts_updated(100, HostUpdateResult.added)
        return state

    plain = at_step_8_with_update()
    with pytest.raises(HostsUpdatedInterrupt):
        plain.check_host_updates()
    plain.sync()
    assert plain.step == 5  # Horovod alone: back to the last commit

    state = at_step_8_with_update()
    with pytest.raises(HostsUpdatedInterrupt):
        sl_horovod.commit_if_hosts_updated(state)
    state.sync()
    assert state.step == 8
    assert sl_horovod.commit_if_hosts_updated(state) is False  # handled once

    quiet = at_step_8_with_update(update=False)
    assert sl_horovod.commit_if_hosts_updated(quiet) is False
    quiet.sync()
    assert quiet.step == 5  # nothing committed


def test_commit_if_hosts_updated_follows_rank_zero():
    """Only the coordinator receives host updates: every rank acts on rank
    0's flag, broadcast."""
    class Rank1(FakeState):
        def _bcast_object(self, obj):
            return True  # rank 0 had an update

    state = Rank1()
    assert sl_horovod.commit_if_hosts_updated(state) is True
    assert state.commits == 1


def test_track_keeps_host_updates(clean_env, planner, reporters):
    r = reporters(FakeHvd(), planner.addr, "job", "t", interval=60, cls=sl_horovod.Reporter)
    state = FakeState()
    r.track(state)
    assert getattr(state, "_schedulearn_keeps_updates", False)
