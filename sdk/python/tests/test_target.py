import schedulearn


def test_target_from_environment():
    t = schedulearn.target({"SCHEDULEARN_TARGET_METRIC": "accuracy", "SCHEDULEARN_TARGET_GOAL": "0.9"})
    assert t == schedulearn.Target("accuracy", 0.9, False)
    assert t.reached("accuracy", 0.9)
    assert t.reached("accuracy", 0.95)
    assert not t.reached("accuracy", 0.89)
    assert not t.reached("top5", 0.99), "another metric"
    assert not t.reached("accuracy", float("nan"))
    assert not t.reached("accuracy", "high")


def test_lower_is_better():
    t = schedulearn.target({"SCHEDULEARN_TARGET_METRIC": "loss", "SCHEDULEARN_TARGET_GOAL": "0.2",
                            "SCHEDULEARN_TARGET_DIRECTION": "min"})
    assert t.lower
    assert t.reached("loss", 0.19)
    assert not t.reached("loss", 0.21)


def test_no_or_bad_target_is_none():
    assert schedulearn.target({}) is None
    assert schedulearn.target({"SCHEDULEARN_TARGET_METRIC": "accuracy"}) is None, "no goal"
    assert schedulearn.target({"SCHEDULEARN_TARGET_METRIC": "accuracy", "SCHEDULEARN_TARGET_GOAL": "x"}) is None
    assert schedulearn.target({"SCHEDULEARN_TARGET_METRIC": "accuracy", "SCHEDULEARN_TARGET_GOAL": "inf"}) is None
    assert schedulearn.target({"SCHEDULEARN_TARGET_METRIC": "accuracy", "SCHEDULEARN_TARGET_GOAL": "1",
                               "SCHEDULEARN_TARGET_DIRECTION": "up"}) is None


def test_batch_spec_from_environment():
    env = {"SCHEDULEARN_BATCH_SIZE": "64", "SCHEDULEARN_BATCH_MAX": "1024", "SCHEDULEARN_BATCH_MAX_PER_GPU": "256"}
    assert schedulearn.batch_spec(env) == schedulearn.BatchSpec(64, 1024, 256)
    for bad in ({}, dict(env, SCHEDULEARN_BATCH_MAX="32"), dict(env, SCHEDULEARN_BATCH_SIZE="x"),
                dict(env, SCHEDULEARN_BATCH_MAX_PER_GPU="0"), dict(env, SCHEDULEARN_BATCH_SIZE="0")):
        assert schedulearn.batch_spec(bad) is None
