"""The example's checkpoint pruning (jobspecs/examples/train_elastic.py): it
keeps the last three, the checkpoint the planner says it holds, those of
this process's reports it may yet record, and the one resumed from; while
the planner cannot be asked, every one."""

import importlib.util
import os

import pytest

from conftest import free_port

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "jobspecs", "examples", "train_elastic.py")


@pytest.fixture
def example(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("train_elastic", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    for k in ("SCHEDULEARN_ADDR", "SCHEDULEARN_JOB_ID", "SCHEDULEARN_TOKEN", "SCHEDULEARN_REPORT_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    mod.model = torch.nn.Linear(2, 2)
    return mod


@pytest.fixture
def run_by(monkeypatch):
    """Makes the example a job of the planner at addr."""
    def at(addr):
        monkeypatch.setenv("SCHEDULEARN_ADDR", addr)
        monkeypatch.setenv("SCHEDULEARN_JOB_ID", "j-1")
        monkeypatch.setenv("SCHEDULEARN_REPORT_TOKEN", "job-token")
    return at


def steps(mod):
    return sorted(s for f in os.listdir(mod.CHECKPOINT_DIR) if (s := mod.checkpoint_step(f)) is not None)


def path(mod, step):
    return os.path.join(mod.CHECKPOINT_DIR, "model-step%08d.pt" % step)


class FakeReporter:
    def __init__(self, *unconfirmed):
        self.unconfirmed = list(unconfirmed)

    def unconfirmed_checkpoints(self):
        return list(self.unconfirmed)


def save(mod, s, reporter=None, resumed=None):
    assert mod.save_model(mod.model, s, force=True, keep=lambda: mod.kept(reporter, resumed)) == path(mod, s)


def test_keeps_the_last_three_outside_the_planner(example):
    for s in (20, 40, 60, 80, 100):
        save(example, s)
    assert steps(example) == [60, 80, 100]


def test_keeps_what_the_planner_holds(example, planner, run_by):
    # The planner took 20; the job saved on, its reports unanswered.
    run_by(planner.addr)
    save(example, 20)
    planner.get_answer = (200, {"checkpoint": path(example, 20), "step": 20})
    for s in (40, 60, 80, 100):
        save(example, s)
    assert steps(example) == [20, 60, 80, 100]
    assert len(planner.gets) == 2, "asked only when a file was to go"


def test_keeps_what_the_planner_may_yet_record(example, planner, run_by):
    run_by(planner.addr)
    r = FakeReporter()
    for s in (20, 40):
        save(example, s, r)
    r.unconfirmed = [path(example, 40)]  # sent, unanswered
    for s in (60, 80, 100):
        save(example, s, r)
    assert steps(example) == [40, 60, 80, 100]


def test_unconfirmed_read_before_the_planner_is_asked(example, planner, run_by):
    # The report of 45 is answered while the planner is asked, which
    # answers what it held before (40): read after that answer, 45 would
    # be neither unconfirmed nor held, and deleted.
    run_by(planner.addr)
    os.makedirs(example.CHECKPOINT_DIR)
    for s in (40, 45, 50, 55):
        with open(path(example, s), "wb") as f:
            f.write(b"x")
    r = FakeReporter(path(example, 45))
    planner.get_answer = (200, {"checkpoint": path(example, 40), "step": 40})
    planner.on_get = r.unconfirmed.clear
    save(example, 60, r)
    assert steps(example) == [40, 45, 50, 55, 60]


def test_deletes_nothing_while_the_planner_cannot_be_asked(example, planner, run_by, monkeypatch, capsys):
    run_by("http://127.0.0.1:%d" % free_port())  # nobody there
    for s in (20, 40, 60, 80, 100):
        save(example, s)
    assert steps(example) == [20, 40, 60, 80, 100]
    assert capsys.readouterr().err.count("deleting no checkpoint until it can be asked") == 1
    # Asked again only after ASK_AGAIN: then back to the last three.
    run_by(planner.addr)
    save(example, 120)
    assert steps(example) == [20, 40, 60, 80, 100, 120] and planner.gets == []
    monkeypatch.setattr(example, "_asking", {"next": 0.0, "warned": True})
    save(example, 140)
    assert steps(example) == [100, 120, 140]
    assert "deleting old checkpoints again" in capsys.readouterr().err


def test_resumed_from_an_older_step(example):
    # A run cut off at 120 left 80, 100 and 120, and the planner held 40:
    # the restart goes on from 40. The later files are an abandoned run's;
    # what this run saves is never pushed out by them.
    os.makedirs(example.CHECKPOINT_DIR)
    for s in (40, 80, 100, 120):
        with open(path(example, s), "wb") as f:
            f.write(b"x")
    resumed = (path(example, 40), 40)
    save(example, 60, resumed=resumed)
    assert steps(example) == [40, 60]
    for s in (80, 100, 120):
        save(example, s, resumed=resumed)
    assert steps(example) == [40, 80, 100, 120]


def test_sigterm_save_deletes_nothing(example):
    for s in (20, 40, 60):
        save(example, s)
    assert example.save_model(example.model, 61, force=True, keep=lambda: None) == path(example, 61)
    assert steps(example) == [20, 40, 60, 61]
