import schedulearn


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
