"""The example's checkpoint pruning (jobspecs/examples/train_elastic.py):
it keeps the last three, and never what a restart would resume from."""

import importlib.util
import json
import os

import pytest

import schedulearn

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "jobspecs", "examples", "train_elastic.py")


@pytest.fixture
def example(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("train_elastic", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    mod.model = torch.nn.Linear(2, 2)
    return mod


def steps(mod):
    return sorted(s for f in os.listdir(mod.CHECKPOINT_DIR) if (s := mod.checkpoint_step(f)) is not None)


def path(mod, step):
    return os.path.join(mod.CHECKPOINT_DIR, "model-step%08d.pt" % step)


class FakeReporter:
    def __init__(self, *held):
        self.held = list(held)

    def held_checkpoints(self):
        return [schedulearn.Resume(p, s) for p, s in self.held]


def test_keeps_the_last_three(example):
    for s in (20, 40, 60, 80, 100):
        assert example.save_model(example.model, s, force=True) == path(example, s)
    assert steps(example) == [60, 80, 100]


def test_keeps_what_the_planner_holds(example):
    # The planner took 20, then was cut off while the job saved on.
    r = FakeReporter()
    example.save_model(example.model, 20, force=True, keep=example.kept(r, None))
    r.held = [(path(example, 20), 20)]
    for s in (40, 60, 80, 100):
        example.save_model(example.model, s, force=True, keep=example.kept(r, None))
    assert steps(example) == [20, 60, 80, 100]


def test_a_new_process_keeps_what_the_last_one_left_held(example):
    # A new rank 0 (or workers started again) has no answer of its own
    # yet: HELD_FILE names what the last process's planner took.
    old = FakeReporter()
    example.save_model(example.model, 40, force=True)
    old.held = [(path(example, 40), 40)]
    for s in (45, 50, 55):
        example.save_model(example.model, s, force=True, keep=example.kept(old, None))
    new = FakeReporter()
    for s in (60, 65, 70):
        example.save_model(example.model, s, force=True, keep=example.kept(new, None))
    assert steps(example) == [40, 60, 65, 70]
    with open(os.path.join(example.CHECKPOINT_DIR, example.HELD_FILE)) as f:
        assert json.load(f) == [path(example, 40)]
    # Once the planner takes one of the new process's, the old one goes.
    new.held = [(path(example, 70), 70)]
    example.save_model(example.model, 75, force=True, keep=example.kept(new, None))
    assert steps(example) == [65, 70, 75]


def test_resumed_from_an_older_step(example):
    # A run cut off at 120 left 80, 100 and 120, and the planner held 40:
    # the restart goes on from 40. The later files are an abandoned run's;
    # what this run saves is never pushed out by them.
    os.makedirs(example.CHECKPOINT_DIR)
    for s in (40, 80, 100, 120):
        with open(path(example, s), "wb") as f:
            f.write(b"x")
    resumed = (path(example, 40), 40)
    assert example.save_model(example.model, 60, force=True, keep=example.kept(None, resumed)) == path(example, 60)
    assert steps(example) == [40, 60]
    for s in (80, 100, 120):
        example.save_model(example.model, s, force=True, keep=example.kept(None, resumed))
    assert steps(example) == [40, 80, 100, 120]
