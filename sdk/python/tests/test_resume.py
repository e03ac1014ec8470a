import importlib
import json

import pytest

import schedulearn
from conftest import free_port

# The module (the package's "resume" is the function).
resume_module = importlib.import_module("schedulearn.resume")


def test_resume_from_environment(tmp_path):
    ckpt = tmp_path / "model-step00000040.pt"
    ckpt.write_bytes(b"x")
    r = schedulearn.resume({"SCHEDULEARN_RESUME_CHECKPOINT": str(ckpt), "SCHEDULEARN_RESUME_STEP": "40"})
    assert r == schedulearn.Resume(str(ckpt), 40)


def test_no_or_bad_resume_is_none(tmp_path):
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"x")
    assert schedulearn.resume({}) is None, "a first start"
    assert schedulearn.resume({"SCHEDULEARN_RESUME_CHECKPOINT": str(ckpt)}) is None, "no step"
    assert schedulearn.resume({"SCHEDULEARN_RESUME_CHECKPOINT": str(ckpt), "SCHEDULEARN_RESUME_STEP": "x"}) is None
    assert schedulearn.resume({"SCHEDULEARN_RESUME_CHECKPOINT": str(ckpt), "SCHEDULEARN_RESUME_STEP": "0"}) is None
    assert schedulearn.resume({"SCHEDULEARN_RESUME_CHECKPOINT": "model.pt", "SCHEDULEARN_RESUME_STEP": "4"}) is None, \
        "a relative path"
    assert schedulearn.resume({"SCHEDULEARN_RESUME_CHECKPOINT": str(tmp_path / "gone.pt"),
                               "SCHEDULEARN_RESUME_STEP": "4"}) is None, "no such file"


# ---------------------------------------------------------------- the planner's answer (issue 27)


@pytest.fixture
def warned(monkeypatch):
    """Each test starts with the once-per-process warning unsaid."""
    monkeypatch.setattr(resume_module, "_warned", False)


def checkpoints(tmp_path, *steps):
    out = []
    for s in steps:
        p = tmp_path / ("model-step%08d.pt" % s)
        p.write_bytes(b"x")
        out.append(str(p))
    return out


def job_env(addr, **extra):
    env = {"SCHEDULEARN_ADDR": addr, "SCHEDULEARN_JOB_ID": "train/1a2b", "SCHEDULEARN_REPORT_TOKEN": "job-token"}
    env.update(extra)
    return env


def test_planner_newer_than_environment(tmp_path, planner, warned):
    old, new = checkpoints(tmp_path, 40, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80})
    env = job_env(planner.addr, SCHEDULEARN_RESUME_CHECKPOINT=old, SCHEDULEARN_RESUME_STEP="40")
    assert schedulearn.resume(env) == schedulearn.Resume(new, 80)
    (path, headers), = planner.gets
    assert path == "/v1/jobs/train%2F1a2b/resume"
    assert headers["X-Schedulearn-Token"] == "job-token"


def test_planner_alone_every_worker_new(tmp_path, planner, warned):
    # Workers a launcher that lived started again: no SCHEDULEARN_RESUME_*.
    new, = checkpoints(tmp_path, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80})
    assert schedulearn.resume(job_env(planner.addr)) == schedulearn.Resume(new, 80)


def test_environment_newer_than_planner(tmp_path, planner, warned):
    old, new = checkpoints(tmp_path, 40, 80)
    planner.get_answer = (200, {"checkpoint": old, "step": 40})
    env = job_env(planner.addr, SCHEDULEARN_RESUME_CHECKPOINT=new, SCHEDULEARN_RESUME_STEP="80")
    assert schedulearn.resume(env) == schedulearn.Resume(new, 80)


def test_planner_token_when_no_report_token(tmp_path, planner, warned):
    new, = checkpoints(tmp_path, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80})
    env = job_env(planner.addr, SCHEDULEARN_TOKEN="admin-token")
    del env["SCHEDULEARN_REPORT_TOKEN"]
    assert schedulearn.resume(env) == schedulearn.Resume(new, 80)
    assert planner.gets[0][1]["X-Schedulearn-Token"] == "admin-token"


def test_not_asked_without_address_job_or_token(tmp_path, planner, warned):
    new, = checkpoints(tmp_path, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80})
    for missing in ("SCHEDULEARN_ADDR", "SCHEDULEARN_JOB_ID", "SCHEDULEARN_REPORT_TOKEN"):
        env = job_env(planner.addr)
        del env[missing]
        assert schedulearn.resume(env) is None, missing
    assert planner.gets == []


def test_planner_down_environment_answers(tmp_path, warned, caplog):
    old, = checkpoints(tmp_path, 40)
    env = job_env("127.0.0.1:%d" % free_port(), SCHEDULEARN_RESUME_CHECKPOINT=old, SCHEDULEARN_RESUME_STEP="40")
    with caplog.at_level("DEBUG", logger="schedulearn"):
        assert schedulearn.resume(env) == schedulearn.Resume(old, 40)
        assert schedulearn.resume(env) == schedulearn.Resume(old, 40)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, "one warning per process"
    assert "cannot ask the planner" in warnings[0].getMessage()


@pytest.mark.parametrize("code,body", [
    (200, b"not json"),
    (200, b"[]"),
    (200, {"checkpoint": 7, "step": 80}),
    (200, {"checkpoint": "/x.pt", "step": "80"}),
    (200, {"checkpoint": "/x.pt", "step": True}),
    (200, b'{"checkpoint": "", "step": 0, "pad": "' + b"x" * (1 << 16) + b'"}'),
    (403, {"error": "permission denied"}),
    (404, {"error": "not found"}),
    (500, {"error": "boom"}),
])
def test_planner_garbage_environment_answers(tmp_path, planner, warned, code, body):
    old, = checkpoints(tmp_path, 40)
    planner.get_answer = (code, body)
    env = job_env(planner.addr, SCHEDULEARN_RESUME_CHECKPOINT=old, SCHEDULEARN_RESUME_STEP="40")
    assert schedulearn.resume(env) == schedulearn.Resume(old, 40)
    assert len(planner.gets) == 1


def test_planner_has_none(tmp_path, planner, warned):
    old, = checkpoints(tmp_path, 40)
    env = job_env(planner.addr, SCHEDULEARN_RESUME_CHECKPOINT=old, SCHEDULEARN_RESUME_STEP="40")
    assert schedulearn.resume(env) == schedulearn.Resume(old, 40)
    assert schedulearn.resume(job_env(planner.addr)) is None


def test_missing_files_are_skipped(tmp_path, planner, warned):
    old, = checkpoints(tmp_path, 40)
    planner.get_answer = (200, {"checkpoint": str(tmp_path / "gone-step80.pt"), "step": 80})
    env = job_env(planner.addr, SCHEDULEARN_RESUME_CHECKPOINT=old, SCHEDULEARN_RESUME_STEP="40")
    assert schedulearn.resume(env) == schedulearn.Resume(old, 40), "the planner's file is not here"
    new, = checkpoints(tmp_path, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80})
    env["SCHEDULEARN_RESUME_CHECKPOINT"] = str(tmp_path / "gone-step40.pt")
    assert schedulearn.resume(env) == schedulearn.Resume(new, 80), "the environment's file is not here"
    planner.get_answer = (200, {"checkpoint": "model-step00000080.pt", "step": 80})
    assert schedulearn.resume(env) is None, "a relative path, and the environment's gone"


def test_a_newer_checkpoint_not_here_is_said(tmp_path, planner, warned, caplog):
    # Never silent: the job got further than the script can resume from
    # (the planner's checkpoint is gone: pruned, or on another host).
    old, = checkpoints(tmp_path, 40)
    gone = str(tmp_path / "model-step00000080.pt")
    planner.get_answer = (200, {"checkpoint": gone, "step": 80})
    env = job_env(planner.addr, SCHEDULEARN_RESUME_CHECKPOINT=old, SCHEDULEARN_RESUME_STEP="40")
    with caplog.at_level("WARNING", logger="schedulearn"):
        assert schedulearn.resume(env) == schedulearn.Resume(old, 40)
    assert caplog.messages == [
        "schedulearn: the checkpoint of step 80 to resume from, %s, is not a file on this host; "
        "resume() answers step 40" % gone]
    caplog.clear()
    with caplog.at_level("WARNING", logger="schedulearn"):
        assert schedulearn.resume(job_env(planner.addr)) is None
    assert caplog.messages == [
        "schedulearn: the checkpoint of step 80 to resume from, %s, is not a file on this host; "
        "resume() answers no checkpoint" % gone]
    # The newest of those missing is said; a relative path as such.
    planner.get_answer = (200, {"checkpoint": "model-step00000090.pt", "step": 90})
    env["SCHEDULEARN_RESUME_CHECKPOINT"], env["SCHEDULEARN_RESUME_STEP"] = gone, "80"
    caplog.clear()
    with caplog.at_level("WARNING", logger="schedulearn"):
        assert schedulearn.resume(env) is None
    assert caplog.messages == [
        "schedulearn: the checkpoint of step 90 to resume from, model-step00000090.pt, is not an absolute "
        "path to a file on this host; resume() answers no checkpoint"]
    env["SCHEDULEARN_RESUME_CHECKPOINT"], env["SCHEDULEARN_RESUME_STEP"] = old, "40"
    # An older answer whose file is gone is no loss: nothing said.
    new, = checkpoints(tmp_path, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80})
    env["SCHEDULEARN_RESUME_CHECKPOINT"] = str(tmp_path / "gone-step40.pt")
    caplog.clear()
    with caplog.at_level("WARNING", logger="schedulearn"):
        assert schedulearn.resume(env) == schedulearn.Resume(new, 80)
    assert caplog.messages == []


def test_planner_resume_point(tmp_path, planner, warned):
    # The planner's word alone, its path unchecked: what a script that
    # prunes checkpoints keeps; None outside a planner; an error when it
    # cannot be asked (then prune nothing).
    planner.get_answer = (200, {"checkpoint": "/ckpt/model-step00000040.pt", "step": 40})
    assert schedulearn.planner_resume_point(job_env(planner.addr)) == schedulearn.Resume("/ckpt/model-step00000040.pt", 40)
    planner.get_answer = (200, {"checkpoint": "", "step": 0})
    assert schedulearn.planner_resume_point(job_env(planner.addr)) is None
    assert schedulearn.planner_resume_point({}) is None
    for answer in [(503, {"error": "away"}), (200, b"garbage")]:
        planner.get_answer = answer
        with pytest.raises(schedulearn.PlannerUnavailable, match="cannot ask the planner at http://127.0.0.1:"):
            schedulearn.planner_resume_point(job_env(planner.addr))
    with pytest.raises(schedulearn.PlannerUnavailable):
        schedulearn.planner_resume_point(job_env("http://127.0.0.1:%d" % free_port()), timeout=1)


def test_an_answer_from_the_record_read_last(tmp_path, planner, warned):
    # The planner's store does not answer: it answers from the record it
    # read last, and says so. A worker's start takes it (the best there
    # is); a script deleting checkpoints must not trust it.
    new, = checkpoints(tmp_path, 80)
    planner.get_answer = (200, {"checkpoint": new, "step": 80}, {"X-Schedulearn-Stale-As-Of": "2026-12-01T04:25:00Z"})
    assert schedulearn.resume(job_env(planner.addr)) == schedulearn.Resume(new, 80)
    with pytest.raises(schedulearn.PlannerUnavailable, match="as of 2026-12-01T04:25:00Z: its store does not answer"):
        schedulearn.planner_resume_point(job_env(planner.addr))


def test_injected_opener(tmp_path, warned):
    new, = checkpoints(tmp_path, 80)
    seen = []

    class Answer:
        status = 200

        def read(self, n):
            return json.dumps({"checkpoint": new, "step": 80}).encode()[:n]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class Opener:
        def open(self, req, timeout=None):
            seen.append((req.full_url, req.get_method(), timeout))
            return Answer()

    r = schedulearn.resume(job_env("planner:4680"), opener=Opener(), timeout=1.5)
    assert r == schedulearn.Resume(new, 80)
    assert seen == [("http://planner:4680/v1/jobs/train%2F1a2b/resume", "GET", 1.5)]
