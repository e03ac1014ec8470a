"""Batch size that follows the GPUs: the report's batch_size and noise_scale,
the planner's advice in the reply, and the noise-scale estimator."""

import math
import random

import pytest

import schedulearn
from schedulearn import BatchAdvice

ADVICE = {"size": 512, "per_gpu": 128, "accumulation": 1, "gpus": 4, "efficiency": 0.83, "noise_scale": 950.0,
          "goodput_gain": 1.7}
GOOD = BatchAdvice(512, 128, 1, 4, 0.83, 950.0, 1.7)


def _reports(planner):
    return [{k: v for k, v in x.items() if k != "time"} for x in planner.reports()]


def test_batch_and_noise_scale_go_out(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    r.report(1, loss=0.5, batch=512, noise_scale=950.5)
    r.report(2, batch=256.0, noise_scale=0)  # a whole float is a batch; no noise is a noise scale
    r.report(3, batch=2 ** 24, noise_scale=1e12)
    assert r.flush(5)
    assert _reports(planner) == [{"step": 1, "loss": 0.5, "batch_size": 512, "noise_scale": 950.5},
                                 {"step": 2, "batch_size": 256, "noise_scale": 0.0},
                                 {"step": 3, "batch_size": 2 ** 24, "noise_scale": 1e12}]


def test_module_report_takes_batch_and_noise_scale(clean_env, planner):
    clean_env.setenv(schedulearn.ENV_ADDR, planner.addr)
    clean_env.setenv(schedulearn.ENV_JOB_ID, "job")
    schedulearn._default = None
    try:
        schedulearn.report(4, batch=64, noise_scale=12.5)
        assert schedulearn.default_reporter().flush(5)
    finally:
        schedulearn.default_reporter().close(0.1)
        schedulearn._default = None
    assert _reports(planner) == [{"step": 4, "batch_size": 64, "noise_scale": 12.5}]


def test_bad_batch_and_noise_scale_are_left_out(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    bad_batches = [0, -1, 2 ** 24 + 1, 12.5, True, "64", float("nan"), float("inf"), object(), [64]]
    bad_noise = [-1, -1e-9, float("nan"), float("inf"), -float("inf"), 1.01e12, "x", object(), [1.0]]
    for step, b in enumerate(bad_batches):
        r.report(step, batch=b)
    for step, ns in enumerate(bad_noise, start=100):
        r.report(step, noise_scale=ns)
    r.report(200, batch=None, noise_scale=None)
    assert r.flush(5)
    got = _reports(planner)
    assert len(got) == len(bad_batches) + len(bad_noise) + 1
    assert all(set(x) == {"step"} for x in got), got
    assert r.dropped == 0


def test_advice_from_a_reply_and_kept_over_204s(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    assert r.batch_advice is None
    assert r.batch_for(4, (128, 32, 1)) == (128, 32, 1)

    r.report(1)
    assert r.flush(5)
    assert r.batch_advice is None  # a 204: no advice yet

    # Unknown keys, in the advice and beside it, are ignored.
    planner.replies = [{"batch": dict(ADVICE, future=True), "other": {"x": 1}}]
    r.report(2)
    assert r.flush(5)
    assert r.batch_advice == GOOD
    assert isinstance(r.batch_advice, tuple)  # immutable

    r.report(3)  # a 204 keeps it
    assert r.flush(5)
    assert r.batch_advice == GOOD

    planner.replies = [{"batch": {"size": 1024, "per_gpu": 128, "accumulation": 2, "gpus": 4}}]
    r.report(4)
    assert r.flush(5)
    assert r.batch_advice == BatchAdvice(1024, 128, 2, 4, None, None, None)
    assert not r.batch_advice.exploring

    planner.replies = [{"batch": dict(ADVICE, exploring=True, goodput_gain=0)}]
    r.report(5)
    assert r.flush(5)
    assert r.batch_advice.exploring and r.batch_advice.goodput_gain == 0
    assert r.sent == 5 and r.dropped == 0


def test_batch_for_matches_the_world_size(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    planner.replies = [{"batch": ADVICE}]
    r.report(1)
    assert r.flush(5)
    default = (128, 64, 1)
    assert r.batch_for(4, default) == (512, 128, 1)
    assert r.batch_for(2, default) is default  # a resize: the advice is for 4 GPUs
    assert r.batch_for(8, default) is default
    assert r.batch_for(None, default) is default
    assert r.batch_for("four", default) is default


def test_bad_advice_is_ignored_and_reporting_goes_on(clean_env, planner, reporters):
    r = reporters(planner.addr, "job", "t", interval=60)
    planner.replies = [{"batch": ADVICE}]
    r.report(0)
    assert r.flush(5)
    assert r.batch_advice == GOOD

    bad = [
        b"not json", b"", b"[1, 2]", b'"batch"', b'{"batch": 3}', b'{"batch": [512]}', {"batch": None},
        {"other": "no batch here"},
        dict(batch=dict(ADVICE, size=500)),  # size != gpus x per_gpu x accumulation
        dict(batch=dict(ADVICE, per_gpu=0, size=0)),
        dict(batch=dict(ADVICE, accumulation=-1, size=-512)),
        dict(batch=dict(ADVICE, gpus="4")),
        dict(batch=dict(ADVICE, size=512.0)),
        dict(batch=dict(ADVICE, accumulation=True)),
        dict(batch={k: v for k, v in ADVICE.items() if k != "gpus"}),
        dict(batch=dict(ADVICE, size=2 ** 25, per_gpu=2 ** 23)),
        b'{"batch": {"size": 512, "per_gpu": 128, "accumulation": 1, "gpus": 4',  # cut short
    ]
    for step, reply in enumerate(bad, start=1):
        planner.replies = [reply]
        r.report(step)
        assert r.flush(5)
        assert r.batch_advice == GOOD, reply
    assert r.enabled and r.sent == len(bad) + 1 and r.dropped == 0
    assert [x["step"] for x in planner.reports()] == list(range(len(bad) + 1))

    # Informational fields that are not numbers >= 0 are left out; the
    # advice itself stands.
    planner.replies = [b'{"batch": {"size": 256, "per_gpu": 64, "accumulation": 1, "gpus": 4,'
                       b' "efficiency": "high", "noise_scale": -1, "goodput_gain": NaN}}']
    r.report(100)
    assert r.flush(5)
    assert r.batch_advice == BatchAdvice(256, 64, 1, 4, None, None, None)


def test_a_disabled_reporter_has_no_advice(clean_env, reporters):
    r = reporters()
    assert not r.enabled
    r.report(1, batch=64, noise_scale=3.0)
    assert r.batch_advice is None
    assert r.batch_for(1, (64, 64, 1)) == (64, 64, 1)


# ------------------------------------------------------------ noise scale

# A made-up problem: the true gradient G and the per-sample covariance Sigma.
G = [3.0, 4.0]  # |G|^2 = 25
SIGMA_DIAG = [100.0, 300.0]  # tr(Sigma) = 400: noise scale 16 samples


def _expected_sqr(grad_sqr, trace, batch):
    # E|g_b|^2 of the mean gradient over `batch` samples.
    return grad_sqr + trace / batch


def test_noise_scale_is_exact_on_expectations():
    grad_sqr, trace = sum(g * g for g in G), sum(SIGMA_DIAG)
    for b, n in [(8, 4), (1, 2), (32, 3), (128, 64)]:
        local = _expected_sqr(grad_sqr, trace, b)
        total = _expected_sqr(grad_sqr, trace, b * n)
        assert schedulearn.noise_scale(local, total, b, n) == pytest.approx(16.0, rel=1e-12)
    # By hand, b = 8 on 4 replicas: E|g_8|^2 = 25 + 400/8 = 75, E|g_32|^2 =
    # 25 + 400/32 = 37.5; |G|^2 = (32*37.5 - 8*75)/24 = 25, tr = 37.5/(1/8 -
    # 1/32) = 400.
    assert schedulearn.noise_scale(75.0, 37.5, 8, 4) == pytest.approx(16.0, rel=1e-12)
    # No noise: both norms equal |G|^2.
    assert schedulearn.noise_scale(25.0, 25.0, 8, 4) == 0.0


@pytest.mark.parametrize("args", [
    (75.0, 37.5, 8, 1),  # one replica: one batch size, nothing to solve
    (75.0, 37.5, 8, 0),
    (75.0, 37.5, 0, 4),
    (0.0, 37.5, 8, 4),
    (75.0, 0.0, 8, 4),
    (-75.0, 37.5, 8, 4),
    (float("nan"), 37.5, 8, 4),
    (75.0, float("inf"), 8, 4),
    (None, 37.5, 8, 4),
    ("x", 37.5, 8, 4),
    (75.0, 37.5, "eight", 4),
    (10.0, 1.0, 1, 2),  # |G|^2 estimate (2*1 - 10)/1 < 0
    (1.0, 2.0, 1, 2),  # tr(Sigma) estimate < 0: the local norm below the global
])
def test_noise_scale_undefined(args):
    assert schedulearn.noise_scale(*args) is None


def _inputs(grad_sqr, trace, b, n):
    return _expected_sqr(grad_sqr, trace, b), _expected_sqr(grad_sqr, trace, b * n), b, n


def test_noise_scale_smoothing():
    ns = schedulearn.NoiseScale(decay=0.5)
    assert ns.value is None and ns.grad_sqr is None and ns.trace is None
    assert ns.update(75.0, 37.5, 8, 1) is None  # unusable: ignored
    assert ns.updates == 0

    # Bias-corrected: after one update the averages are its estimates.
    assert ns.update(*_inputs(25.0, 400.0, 8, 4)) == pytest.approx(16.0)
    assert ns.grad_sqr == pytest.approx(25.0) and ns.trace == pytest.approx(400.0)

    # The numerator and the denominator are averaged apart: with decay 0.5,
    # after two updates the weights are 1/3 and 2/3, so the value is
    # (400 + 2*100) / (25 + 2*100), not a mean of the ratios 16 and 1.
    ns.update(*_inputs(100.0, 100.0, 16, 2))  # another batch and world size: same quantities
    assert ns.updates == 2
    assert ns.grad_sqr == pytest.approx(225.0 / 3) and ns.trace == pytest.approx(600.0 / 3)
    assert ns.value == pytest.approx(600.0 / 225.0)

    ns.update(float("nan"), 1.0, 8, 4)  # ignored
    assert ns.updates == 2 and ns.value == pytest.approx(600.0 / 225.0)

    # A negative |G|^2 average defines no noise scale, until later steps
    # pull it above 0.
    ns = schedulearn.NoiseScale(decay=0.9)
    assert ns.update(10.0, 1.0, 1, 2) is None
    assert ns.updates == 1 and ns.grad_sqr == pytest.approx(-8.0)
    for _ in range(20):
        ns.update(*_inputs(25.0, 400.0, 8, 4))
    assert ns.value is not None and 16.0 < ns.value < 17.0

    with pytest.raises(ValueError):
        schedulearn.NoiseScale(decay=1.0)


def test_noise_scale_from_sampled_gradients():
    # Per-sample gradients drawn from N(G, Sigma): the smoothed estimate
    # lands near tr(Sigma)/|G|^2 = 16 though single steps scatter widely.
    rng = random.Random(1)
    sd = [math.sqrt(v) for v in SIGMA_DIAG]
    b, n = 4, 4
    ns = schedulearn.NoiseScale(decay=0.998)
    singles = []
    for _ in range(3000):
        local = []
        sums = [0.0] * len(G)
        for _ in range(n):
            g = [sum(rng.gauss(mu, s) for _ in range(b)) / b for mu, s in zip(G, sd)]
            local.append(sum(x * x for x in g))
            sums = [a + x for a, x in zip(sums, g)]
        total = sum((a / n) ** 2 for a in sums)
        ns.update(sum(local) / n, total, b, n)
        singles.append(schedulearn.noise_scale(sum(local) / n, total, b, n))
    assert ns.value == pytest.approx(16.0, rel=0.2)
    assert singles.count(None) > 100  # why the estimates are averaged before dividing
