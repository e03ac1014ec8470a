"""The gradient noise scale, from what data-parallel training has anyway.

The "simple" noise scale of McCandlish et al. (2018, "An Empirical Model of
Large-Batch Training") is B = tr(Sigma) / |G|^2, in samples: G is the true
gradient, Sigma the covariance of one sample's gradient. Below B a larger
batch trains nearly as many times faster; well above it, hardly faster at
all. The planner uses it (reported as ``noise_scale=``) to weigh a larger
batch on more GPUs against the samples it wastes.

A mean gradient over b samples has E|g_b|^2 = |G|^2 + tr(Sigma)/b. Data
parallel training sees two batch sizes at every step: each replica's own
gradient (b = local_batch) before the all-reduce, and the averaged one
(B = b * replicas) after it. Two equations, two unknowns, each solved
without bias::

    |G|^2     ~= (B * |g_B|^2 - b * |g_b|^2) / (B - b)
    tr(Sigma) ~= (|g_b|^2 - |g_B|^2) / (1/b - 1/B)

One step's estimates are very noisy (the first is often negative);
:class:`NoiseScale` averages the two separately over steps and only then
divides, as McCandlish et al. recommend. Both estimates are of quantities
that do not depend on the batch size, so the averages carry over when the
batch or the number of replicas changes.

With Horovod and PyTorch (a loss averaged over the batch, a plain optimizer,
gradients averaged explicitly so that the local ones can be measured
first)::

    gns = schedulearn.NoiseScale()
    ...
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    local = torch.stack([g.pow(2).sum() for g in grads]).sum()   # this replica's |g_b|^2
    for g in grads:
        g.copy_(hvd.allreduce(g, op=hvd.Average))
    total = torch.stack([g.pow(2).sum() for g in grads]).sum()   # |g_B|^2
    local = hvd.allreduce(local, op=hvd.Average)                  # the mean over replicas
    gns.update(local.item(), total.item(), per_gpu * accumulation, hvd.size())
    optimizer.step()
    ...
    reporter.report(step, batch=size, noise_scale=gns.value)

Measuring every few steps is enough (the norms cost a pass over the
gradients and two ``.item()`` waits for the GPU).
"""

import math

__all__ = ["noise_scale", "NoiseScale"]


def _estimates(local_sqr, global_sqr, local_batch, replicas):
    """(|G|^2, tr(Sigma)) estimated from one step, or None when the inputs
    cannot give them (fewer than two replicas, a value that is not a
    finite number above 0)."""
    try:
        local_sqr, global_sqr = float(local_sqr), float(global_sqr)
        b, n = int(local_batch), int(replicas)
    except (TypeError, ValueError):
        return None
    if n < 2 or b < 1 or not (math.isfinite(local_sqr) and math.isfinite(global_sqr)):
        return None
    if local_sqr <= 0 or global_sqr <= 0:
        return None
    big = b * n
    grad_sqr = (big * global_sqr - b * local_sqr) / (big - b)
    trace = (local_sqr - global_sqr) / (1.0 / b - 1.0 / big)
    return grad_sqr, trace


def _ratio(trace, grad_sqr):
    # A noise scale is a number of samples: undefined while the |G|^2
    # estimate is not positive, or the tr(Sigma) one is negative.
    if grad_sqr <= 0 or trace < 0:
        return None
    b = trace / grad_sqr
    return b if math.isfinite(b) else None


def noise_scale(local_sqr, global_sqr, local_batch, replicas):
    """The gradient noise scale tr(Sigma)/|G|^2 (in samples) estimated from
    one step, or None.

    Args:
        local_sqr: |g_local|^2 averaged over the replicas: each replica's
            own (mean) gradient, over ``local_batch`` samples, before the
            all-reduce.
        global_sqr: |g|^2 of the all-reduced (averaged) gradient, over
            ``local_batch * replicas`` samples.
        local_batch: the samples behind one replica's gradient (per GPU
            micro-batch times accumulation steps).
        replicas: the number of replicas (the world size), at least 2.

    None when there are fewer than 2 replicas, an input is not a finite
    number above 0, the |G|^2 estimate is not above 0, or the tr(Sigma)
    estimate is below 0. One step's estimate is noisy: see
    :class:`NoiseScale`.
    """
    est = _estimates(local_sqr, global_sqr, local_batch, replicas)
    return None if est is None else _ratio(est[1], est[0])


class NoiseScale:
    """The gradient noise scale, smoothed over steps: exponential moving
    averages of the |G|^2 and tr(Sigma) estimates, kept apart and
    bias-corrected (as Adam's moments), whose ratio is :attr:`value`.

    Args:
        decay: the averages' decay per update (0.9: about the last ten
            updates count).
    """

    def __init__(self, decay=0.9):
        decay = float(decay)
        if not 0 <= decay < 1:
            raise ValueError("decay must be in [0, 1), not %r" % decay)
        self.decay = decay
        self.updates = 0  # updates taken (those with usable inputs)
        self._grad_sqr = 0.0
        self._trace = 0.0

    def update(self, local_sqr, global_sqr, local_batch, replicas):
        """Takes one step's measurements (see :func:`noise_scale`); inputs
        that give no estimate are ignored. Returns :attr:`value`."""
        est = _estimates(local_sqr, global_sqr, local_batch, replicas)
        if est is not None:
            d = self.decay
            self._grad_sqr = d * self._grad_sqr + (1 - d) * est[0]
            self._trace = d * self._trace + (1 - d) * est[1]
            self.updates += 1
        return self.value

    @property
    def grad_sqr(self):
        """The averaged |G|^2 estimate (None before the first update)."""
        return self._corrected(self._grad_sqr)

    @property
    def trace(self):
        """The averaged tr(Sigma) estimate (None before the first update)."""
        return self._corrected(self._trace)

    @property
    def value(self):
        """The noise scale in samples, or None: no update yet, or the
        averages do not define one (|G|^2 not above 0, tr(Sigma) below 0)."""
        if self.updates == 0:
            return None
        return _ratio(self.trace, self.grad_sqr)

    def _corrected(self, avg):
        # The averages start at 0; dividing by 1 - decay^n removes that
        # pull towards 0 (after one update, the average is the estimate).
        if self.updates == 0:
            return None
        return avg / (1 - self.decay ** self.updates)
