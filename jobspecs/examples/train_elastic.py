#!/usr/bin/env python3
"""Elastic training example for the horovod task driver.

A small real PyTorch model (an MLP classifier) trained on synthetic data
with Horovod's elastic API: the training state (model, optimizer, step) is
a hvd.elastic.TorchState committed every COMMIT_EVERY steps, so workers can
join and leave while training runs. Every step prints the step and the
world size, and appends one JSON line to $PROGRESS_FILE (if set):

    {"step": 12, "world_size": 2, "rank": 0, "time": 1700000000.1, "loss": 2.3}

Run by horovodrun (launcher = "horovod") or, with --torchrun, by torchrun
(launcher = "torchrun"), which restarts the workers on every membership
change; then the state is kept in a checkpoint file ($CHECKPOINT) instead.

Run by the planner, it also reports its progress (step, throughput, loss,
and the metric "accuracy") through the training SDK (sdk/python, the
`schedulearn` package, which `make python-deps` installs into
.cache/venv): rank 0 reports when SCHEDULEARN_ADDR is set. Without the SDK,
or outside the planner, it trains the same and reports nothing.

The "accuracy" metric is the model's accuracy on a small fixed validation
set (VALIDATION_SIZE samples of the same synthetic rule, drawn once with a
seed of their own), measured by rank 0 at every commit: unlike one batch's
accuracy, which jumps by several points from step to step, it rises
steadily, so a jobspec target on it (tier1, goal) is reached once, for a
model that is that good. (It climbs from 0.1 to about 0.45 in 300 steps
on one worker, faster with more.)

Batch size (horovod): with a jobspec batch block (the SDK's batch_spec()),
rank 0 reports the global batch and the gradient noise scale (measured
every commit from the local and all-reduced gradients, one more backward
pass and one allreduce; the SDK's NoiseScale), and at each commit every
rank takes the per-GPU batch the planner advises for this world (the SDK's
batch_for, rank 0's answer broadcast), the learning rate scaled with the
global batch (BASE_LR at BATCH_SIZE); advice with gradient accumulation is
left. A new world starts again at BATCH_SIZE a GPU until advised.

Preemption: on SIGTERM (the planner stops the job to give its GPUs to
another queue, or a shrink removes a worker) rank 0 saves the model at once
and reports it with its step (the SDK's on_sigterm), within the task's
grace period; when the planner starts the job again it passes that
checkpoint, and training resumes from its step instead of step 0. The
save runs in a thread the signal wakes, under the lock the loop holds
while it updates the model and the step, so it happens even while the
main thread waits in a collective whose peers are stopping too. New
workers that a launcher which lived starts after every worker was lost
ask the planner for its newest checkpoint (see SCHEDULEARN_RESUME_*
below).

Model checkpoints, for the planner's model delivery: every CHECKPOINT_EVERY
commits, rank 0 saves the model's state_dict (torch.save) to
model-step<step>.pt in $CHECKPOINT_DIR, or in $NOMAD_ALLOC_DIR/checkpoints
when that is unset (neither: no checkpoints), writing a temporary file and
renaming it, keeps the last three (and the one the planner holds, those
it may yet record and the one it resumed from: a restart resumes from what
the planner holds, which may be older when it was away; while it cannot
be asked, every one; see kept()), and reports the path with the SDK's
checkpoint= argument. When the accuracy reaches the jobspec's tier1 (and
goal), the planner copies the first checkpoint reported at or after that
step; it reads the path on its own machine, so CHECKPOINT_DIR should be on
a filesystem the planner shares when the workers run elsewhere.

Environment:
    TOTAL_STEPS    steps to train (default 200)
    STEP_SLEEP     seconds to sleep per step, to pace a demo (default 0.1)
    SYNC_SLEEP     more seconds per step for each worker beyond the first
                   (default 0): a stand-in for the gradient exchange of a
                   slow interconnect, so that throughput stops scaling
                   linearly (throughput(g) ~ g / (STEP_SLEEP + SYNC_SLEEP
                   * (g - 1)), Amdahl's law) in a lab on simulated GPUs
    SAMPLE_SLEEP   more seconds per step for each sample of a GPU's batch
                   (default 0): a stand-in for a GPU's compute, so that a
                   larger batch takes longer, in a lab on simulated GPUs
    COMMIT_EVERY   steps between commits (default 5)
    HOST_CHECK_EVERY  steps between checks for added or removed hosts
                   between commits (default 1; 0: only at commits): Horovod
                   takes a membership change in at a commit; the SDK's
                   commit_if_hosts_updated (one small broadcast) commits
                   at once when rank 0 holds one, so a grown job takes its
                   new worker in at the next step instead of the next
                   commit (without the SDK: at commits only)
    BATCH_SIZE     samples per worker per step (default 64)
    PROGRESS_FILE  JSON lines progress, one per step and rank
    FAIL_AT_STEP   exit 3 with a message on stderr at this step (tests)
    STALL_AT_STEP, STALL_MARK
                   at this step, when the file STALL_MARK does not exist yet,
                   create it and make no more progress until stopped (a hung
                   collective or data loader, for the planner's health watch:
                   tests); the run after that goes on
    STOP_FILE      when this file exists, training ends at the next commit
                   (tests and demos that rescale a running job)
    STOP_AT_GOAL   "1" (default): with a jobspec target on "accuracy", the
                   horovod run ends at the first commit whose validation
                   accuracy reaches the goal, after saving that model;
                   "0": train all TOTAL_STEPS
    CHECKPOINT_EVERY  commits between model checkpoints (default 4)
    CHECKPOINT_DIR    where model checkpoints go (default
                   $NOMAD_ALLOC_DIR/checkpoints; neither set: none)
    VALIDATION_SIZE   samples in the validation set (default 512)
    CHECKPOINT     --torchrun: the training state's file, to resume from
                   after a restart (also reported as a checkpoint)
    SCHEDULEARN_RESUME_CHECKPOINT, SCHEDULEARN_RESUME_STEP
                   set by the planner when the job starts again after a
                   preemption: the last checkpoint it reported (in the
                   planner's checkpoint_dirs) and its step; training goes
                   on from there (both launchers). Every worker process
                   also asks the planner at its start (the SDK's
                   resume(): GET /v1/jobs/{id}/resume) and takes the
                   newer of the two, so that workers a launcher which
                   lived starts again after every worker was lost (these
                   variables are then the launcher's, as of its start)
                   go on from the newest checkpoint the planner holds,
                   not from step 1; under torchrun, the newer of that
                   and $CHECKPOINT's file
    CUDA_VISIBLE_DEVICES  the worker's GPUs; used when CUDA is available
"""

import json
import os
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TOTAL_STEPS = int(os.environ.get("TOTAL_STEPS", "200"))
STEP_SLEEP = float(os.environ.get("STEP_SLEEP", "0.1"))
SYNC_SLEEP = float(os.environ.get("SYNC_SLEEP", "0"))
SAMPLE_SLEEP = float(os.environ.get("SAMPLE_SLEEP", "0"))
COMMIT_EVERY = int(os.environ.get("COMMIT_EVERY", "5"))
HOST_CHECK_EVERY = int(os.environ.get("HOST_CHECK_EVERY", "1"))
BATCH_SIZE = int(os.environ.get("BATCH_SIZE", "64"))
PROGRESS_FILE = os.environ.get("PROGRESS_FILE", "")
FAIL_AT_STEP = int(os.environ.get("FAIL_AT_STEP", "0"))
STALL_AT_STEP = int(os.environ.get("STALL_AT_STEP", "0"))
STALL_MARK = os.environ.get("STALL_MARK", "")
STOP_FILE = os.environ.get("STOP_FILE", "")
CHECKPOINT_EVERY = max(1, int(os.environ.get("CHECKPOINT_EVERY", "4")))
CHECKPOINT_DIR = os.environ.get("CHECKPOINT_DIR", "") or (
    os.path.join(os.environ["NOMAD_ALLOC_DIR"], "checkpoints") if os.environ.get("NOMAD_ALLOC_DIR") else "")
CHECKPOINT_KEEP = 3
VALIDATION_SIZE = int(os.environ.get("VALIDATION_SIZE", "512"))
STOP_AT_GOAL = os.environ.get("STOP_AT_GOAL", "1") == "1"
BASE_LR = 0.01


def job_target():
    """The jobspec's target on "accuracy" that training stops at (the SDK
    reads it from the planner's environment), or None: no target on it,
    STOP_AT_GOAL=0, or no SDK."""
    if not STOP_AT_GOAL:
        return None
    try:
        from schedulearn import target
    except ImportError:
        return None
    t = target()
    return t if t is not None and t.metric == "accuracy" else None


TARGET = job_target()


def resume_point():
    """Where to resume: (checkpoint path, step), from the planner (the
    SDK's schedulearn.resume(): the newer of the start's environment and
    the planner's answer now), or None: a first start, or nothing to
    resume from. Without the SDK, the environment's only."""
    try:
        from schedulearn import resume
    except ImportError:  # no SDK, or one older than resume()
        path = os.environ.get("SCHEDULEARN_RESUME_CHECKPOINT", "")
        step = os.environ.get("SCHEDULEARN_RESUME_STEP", "")
        ok = path and os.path.isabs(path) and os.path.isfile(path) and step.isdigit() and int(step) > 0
        return (path, int(step)) if ok else None
    r = resume()
    return (r.checkpoint, r.step) if r is not None else None


def load_resume(model, optimizer, path):
    """Loads the checkpoint at path into model (and optimizer): a model
    checkpoint (a state_dict, as save_model writes) or --torchrun's
    training state ({"model", "optimizer", "step"})."""
    saved = torch.load(path, map_location="cpu")
    if isinstance(saved, dict) and "model" in saved and "step" in saved:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
    else:
        model.load_state_dict(saved)


def save_on_sigterm(reporter, save, lock):
    """On SIGTERM (a shrink that removes this worker, or a preemption),
    save() saves a checkpoint and returns (path, step) or None; the path
    is reported at that step and the reports are flushed before the
    process dies of the signal (the SDK's on_sigterm). lock is held by the
    training loop while it changes the model and its step: the save runs
    under it at once, even while the main thread waits in a collective
    (whose peers stop too: it would fail before a handler of the main
    thread could save)."""
    try:
        from schedulearn import on_sigterm
    except ImportError:
        return

    def callback():
        saved = save()
        if saved is not None:
            path, step = saved
            print(f"SIGTERM: saved a checkpoint at step {step}", flush=True)
            if reporter is not None:
                reporter.report(step, checkpoint=path)
        return None

    try:
        on_sigterm(callback, reporter, lock=lock)
    except TypeError:  # an SDK older than on_sigterm's lock
        on_sigterm(callback, reporter)


def host_update_check():
    """The SDK's commit_if_hosts_updated (a membership change taken at the
    next step, committed first), or None without the SDK: then Horovod takes
    it at the next commit."""
    if HOST_CHECK_EVERY <= 0:
        return None
    try:
        from schedulearn.horovod import commit_if_hosts_updated
    except ImportError:
        return None
    return commit_if_hosts_updated


def make_reporter(launcher, hvd=None):
    """The SDK's reporter for this launcher, or None: not run by the
    planner (no SCHEDULEARN_ADDR), or the SDK is not installed."""
    if not os.environ.get("SCHEDULEARN_ADDR"):
        return None
    try:
        if launcher == "horovod":
            from schedulearn import horovod as sl
            return sl.Reporter(hvd)
        from schedulearn import torchrun as sl
        return sl.Reporter()
    except ImportError:
        print("schedulearn SDK not installed; progress is not reported", file=sys.stderr, flush=True)
        return None


class Pace:
    """Samples per second over the last step, all workers together."""

    def __init__(self):
        self.last = time.monotonic()

    def rate(self, samples):
        now = time.monotonic()
        elapsed, self.last = now - self.last, now
        return samples / elapsed if elapsed > 0 else None


def accuracy(logits, y):
    return (logits.argmax(dim=1) == y).float().mean().item()


def rule():
    # A fixed random linear rule, so the loss can fall.
    return torch.randn(32, 10, generator=torch.Generator().manual_seed(42))


def validation_set(device):
    """VALIDATION_SIZE samples of the rule, the same on every run and rank."""
    x = torch.randn(VALIDATION_SIZE, 32, generator=torch.Generator().manual_seed(7))
    return x.to(device), (x @ rule()).argmax(dim=1).to(device)


def validation_accuracy(model, val):
    x, y = val
    was_training = model.training
    model.eval()
    with torch.no_grad():
        acc = accuracy(model(x), y)
    model.train(was_training)
    return acc


# While the planner cannot be asked which checkpoint it holds, kept() asks
# again only after ASK_AGAIN seconds (deleting nothing meanwhile), each time
# within ASK_TIMEOUT: a planner cut off would otherwise hold rank 0, and
# every rank behind it, at each checkpoint.
ASK_AGAIN = 60.0
ASK_TIMEOUT = 1.0
_asking = {"next": 0.0, "warned": False}


def kept(reporter, resumed):
    """The checkpoints save_model must not delete, or None: delete none.

    A restart resumes from the checkpoint the planner holds, which may be
    older than those saved since (the planner away, or cut off from this
    host, while the job saved more): that one (the SDK's
    planner_resume_point(), asked now), those of reports queued or being
    sent, which it may yet record (the reporter's
    unconfirmed_checkpoints(), read first: none slips between the two),
    and the one this process resumed from. When the planner cannot be
    asked, None, and none is deleted until it can be (said once). Without
    the SDK's planner_resume_point, the one resumed from, or None where a
    reporter reports checkpoints."""
    out = set()
    if resumed is not None:
        out.add(os.path.abspath(resumed[0]))
    try:
        from schedulearn import PlannerUnavailable, planner_resume_point
    except ImportError:  # no SDK, or one older than planner_resume_point()
        return out if reporter is None else None
    unconfirmed = getattr(reporter, "unconfirmed_checkpoints", None) if reporter is not None else None
    if unconfirmed is not None:
        out.update(os.path.abspath(p) for p in unconfirmed())
    now = time.monotonic()
    if now < _asking["next"]:
        return None
    try:
        held = planner_resume_point(timeout=ASK_TIMEOUT)
    except PlannerUnavailable as e:
        _asking["next"] = now + ASK_AGAIN
        if not _asking["warned"]:
            _asking["warned"] = True
            print(f"{e}; deleting no checkpoint until it can be asked", file=sys.stderr, flush=True)
        return None
    if _asking["warned"]:
        _asking["warned"] = False
        print("the planner can be asked again: deleting old checkpoints again", file=sys.stderr, flush=True)
    if held is not None:
        out.add(os.path.abspath(held.checkpoint))
    return out


def checkpoint_step(name):
    """The step of model checkpoint file name (model-step<step>.pt), or
    None for another file."""
    if not (name.startswith("model-step") and name.endswith(".pt")):
        return None
    digits = name[len("model-step"):-len(".pt")]
    return int(digits) if digits.isdigit() else None


def save_model(model, step, force=False, keep=lambda: set()):
    """Saves the model's weights for delivery, every CHECKPOINT_EVERY
    commits, or now if force (call it at commits, on rank 0); returns the
    path, or None. Then deletes, but for those keep() names (kept(); None:
    delete none), the checkpoints of later steps (a run this one resumed
    before: abandoned) and all but the last CHECKPOINT_KEEP up to this
    step."""
    if not CHECKPOINT_DIR or (not force and step % (COMMIT_EVERY * CHECKPOINT_EVERY) != 0):
        return None
    try:
        os.makedirs(CHECKPOINT_DIR, exist_ok=True)
        path = os.path.abspath(os.path.join(CHECKPOINT_DIR, f"model-step{step:08d}.pt"))
        tmp = path + ".tmp"
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, path)
        steps = sorted((s, f) for f in os.listdir(CHECKPOINT_DIR) if (s := checkpoint_step(f)) is not None)
        upto = [f for s, f in steps if s <= step]
        drop = [f for s, f in steps if s > step] + upto[:-CHECKPOINT_KEEP]
        kept_now = keep() if drop else None  # asked only when a file would go
        if kept_now is not None:
            for f in drop:
                old = os.path.abspath(os.path.join(CHECKPOINT_DIR, f))
                if old not in kept_now and old != path:
                    os.remove(old)
        return path
    except OSError as e:  # a full disk must not stop training
        print(f"failed to save a checkpoint at step {step}: {e}", file=sys.stderr, flush=True)
        return None


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10))


def device_for(local_rank):
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda")
    return torch.device("cpu")


def synthetic_batch(step, rank, device, n=BATCH_SIZE):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(n, 32, generator=g)
    y = (x @ rule()).argmax(dim=1)
    return x.to(device), y.to(device)


def record(step, world_size, rank, loss, launcher, batch=None):
    print(f"step {step} world_size {world_size} rank {rank} loss {loss:.4f}", flush=True)
    if PROGRESS_FILE:
        fields = {"step": step, "world_size": world_size, "rank": rank,
                  "time": time.time(), "loss": round(loss, 5), "launcher": launcher}
        if batch is not None:
            fields["batch"] = batch
        line = json.dumps(fields)
        with open(PROGRESS_FILE, "a") as f:
            f.write(line + "\n")


def stop_requested():
    return 1 if STOP_FILE and os.path.exists(STOP_FILE) else 0


def maybe_fail(step):
    if FAIL_AT_STEP and step >= FAIL_AT_STEP:
        print(f"training failed: loss diverged at step {step}", file=sys.stderr, flush=True)
        sys.exit(3)
    if STALL_AT_STEP and step >= STALL_AT_STEP and STALL_MARK:
        try:
            fd = os.open(STALL_MARK, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return  # stalled once already (this run, or one before it)
        os.close(fd)
        print(f"training stalls at step {step} (STALL_AT_STEP)", file=sys.stderr, flush=True)
        while True:
            time.sleep(1)


def batch_block():
    """The jobspec's batch block (the SDK's batch_spec()), or None: none,
    or no SDK. With one, the script reports its global batch and gradient
    noise scale and trains at the per-GPU batch the planner advises."""
    try:
        from schedulearn import batch_spec
    except ImportError:
        return None
    return batch_spec()


def noise_scale_meter():
    from schedulearn import NoiseScale
    return NoiseScale()


def measure_noise(model, x, y, hvd, meter):
    """Feeds meter (the SDK's NoiseScale) this step's local and all-reduced
    gradient norms: one more backward pass (torch.autograd.grad, which
    Horovod's optimizer hooks do not see) and one allreduce."""
    params = list(model.parameters())
    grads = torch.autograd.grad(F.cross_entropy(model(x), y), params)
    flat = torch.cat([g.reshape(-1) for g in grads])
    both = hvd.allreduce(torch.cat([flat, flat.pow(2).sum().reshape(1)]), op=hvd.Average, name="noise_scale")
    meter.update(float(both[-1]), float(both[:-1].pow(2).sum()), x.shape[0], hvd.size())


def run_horovod():
    import horovod.torch as hvd

    hvd.init()
    device = device_for(hvd.local_rank())
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    reporter = make_reporter("horovod", hvd)
    step_lock = threading.Lock()
    pace = Pace()
    val = validation_set(device)
    spec = batch_block()
    meter = noise_scale_meter() if spec is not None else None
    # The per-GPU batch: BATCH_SIZE (the learning rate scales with the
    # global batch, BASE_LR at BATCH_SIZE), or the planner's advice.
    batch = {"per_gpu": BATCH_SIZE}

    def set_lr():
        for group in optimizer.param_groups:
            group["lr"] = BASE_LR * batch["per_gpu"] * hvd.size() / BATCH_SIZE

    def follow_advice():
        # Rank 0 holds the reporter's advice; every rank takes its answer.
        advice = reporter.batch_for(hvd.size(), None) if reporter is not None else None
        advice = hvd.broadcast_object(advice, root_rank=0, name="batch_advice")
        # This script does no gradient accumulation: advice that asks for
        # it is left.
        if advice is not None and advice[2] == 1 and advice[1] != batch["per_gpu"]:
            batch["per_gpu"] = advice[1]
            set_lr()
            if hvd.rank() == 0:
                print(f"batch {advice[0]} ({advice[1]} a GPU on {hvd.size()}), as the planner advises", flush=True)

    take_hosts = host_update_check()

    @hvd.elastic.run
    def train(state):
        while state.step < TOTAL_STEPS:
            maybe_fail(state.step + 1)
            x, y = synthetic_batch(state.step, hvd.rank(), device, batch["per_gpu"])
            optimizer.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            # The allreduce waits outside the lock; the update and the step
            # change under it (a SIGTERM's save takes it).
            optimizer.synchronize()
            with step_lock:
                with optimizer.skip_synchronize():
                    optimizer.step()
                state.step += 1
            global_batch = batch["per_gpu"] * hvd.size()
            record(state.step, hvd.size(), hvd.rank(), loss.item(), "horovod",
                   global_batch if spec is not None else None)
            if meter is not None and hvd.size() > 1 and state.step % COMMIT_EVERY == 0:
                measure_noise(model, x, y, hvd, meter)
            if reporter is not None:
                extra = {} if spec is None else {"batch": global_batch, "noise_scale": meter.value}
                reporter.report(state.step, samples_per_sec=pace.rate(global_batch), loss=loss.item(), **extra)
            if state.step % COMMIT_EVERY == 0:
                state.commit()
                if spec is not None:
                    follow_advice()
                stop = stop_requested()
                if hvd.rank() == 0:
                    # Every rank holds the same model: rank 0 measures and saves it.
                    acc = validation_accuracy(model, val)
                    # At the goal, save at once: that model is the one delivered.
                    at_goal = TARGET is not None and TARGET.reached("accuracy", acc)
                    path = save_model(model, state.step, force=at_goal, keep=lambda: kept(reporter, resumed))
                    if reporter is not None:
                        reporter.report(state.step, metric="accuracy", value=acc, checkpoint=path)
                    if at_goal:
                        print(f"accuracy {acc:.4f} reached the goal {TARGET.goal} at step {state.step}", flush=True)
                        stop = 1
                # Every rank agrees on stopping: the flag is summed.
                if (STOP_FILE or TARGET is not None) and hvd.allreduce(torch.tensor(float(stop)), op=hvd.Sum).item() > 0:
                    break
            elif take_hosts is not None and state.step % HOST_CHECK_EVERY == 0:
                # Between commits: a changed membership commits this step
                # and raises HostsUpdatedInterrupt here.
                take_hosts(state)
            time.sleep(STEP_SLEEP + SYNC_SLEEP * (hvd.size() - 1) + SAMPLE_SLEEP * batch["per_gpu"])

    def on_reset():
        # A new world: the default per-GPU batch until the planner advises
        # one for it, the learning rate scaled with the global batch.
        batch["per_gpu"] = BATCH_SIZE
        set_lr()

    start = 0
    resumed = resume_point()
    if resumed is not None:
        # Preempted and started again, or a new worker that horovodrun
        # started after every worker was lost: on from the checkpoint's
        # step (SGD without momentum keeps no state beyond the weights).
        # Called in every new worker process, before the elastic state
        # exists; a worker that joins a living world gets rank 0's state
        # at the first sync anyway.
        load_resume(model, optimizer, resumed[0])
        start = resumed[1]
        if hvd.rank() == 0:
            print(f"resuming from step {start} ({resumed[0]})", flush=True)
    state = hvd.elastic.TorchState(model, optimizer, step=start)
    state.register_reset_callbacks([on_reset])

    def save_now():
        if hvd.rank() != 0:
            return None
        # On SIGTERM save and report at once: delete nothing (asking the
        # planner what it holds could take the time left to report).
        path = save_model(model, state.step, force=True, keep=lambda: None)
        return (path, state.step) if path else None

    save_on_sigterm(reporter, save_now, step_lock)
    if reporter is not None:
        # Reports the world size after every reset and the step at every
        # commit, and keeps host updates that arrive during a reset.
        reporter.track(state)
    train(state)
    if hvd.rank() == 0:
        print(f"training done after {state.step} steps", flush=True)
    if reporter is not None:
        reporter.close(timeout=5)


def run_torchrun():
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    device = device_for(int(os.environ.get("LOCAL_RANK", "0")))
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR * size)
    ckpt = os.environ.get("CHECKPOINT", "")
    step = 0
    # torchrun restarts every worker on a membership change: the state
    # comes back from the last checkpoint rank 0 wrote ($CHECKPOINT), or
    # from the planner's (preempted and started again, or restarted
    # without $CHECKPOINT's file), whichever is newer; rank 0's is
    # broadcast below.
    resumed = resume_point()
    saved = torch.load(ckpt) if ckpt and os.path.exists(ckpt) else None
    if saved is not None and (resumed is None or saved["step"] >= resumed[1]
                              or resumed[0] == os.path.abspath(ckpt)):
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    elif resumed is not None:
        load_resume(model, optimizer, resumed[0])
        step = resumed[1]
        if rank == 0:
            print(f"resuming from step {step} ({resumed[0]})", flush=True)
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    step_t = torch.tensor([step])
    dist.broadcast(step_t, 0)
    step = int(step_t.item())
    reporter = make_reporter("torchrun")
    pace = Pace()
    val = validation_set(device)
    current = {"step": step}
    step_lock = threading.Lock()

    def save_now():
        if rank != 0:
            return None
        # Delete nothing on SIGTERM (see the horovod path).
        path = save_model(model, current["step"], force=True, keep=lambda: None)
        return (path, current["step"]) if path else None

    save_on_sigterm(reporter, save_now, step_lock)
    while step < TOTAL_STEPS:
        maybe_fail(step + 1)
        x, y = synthetic_batch(step, rank, device)
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= size
        with step_lock:
            optimizer.step()
            step += 1
            current["step"] = step
        record(step, size, rank, loss.item(), "torchrun")
        if reporter is not None:
            reporter.report(step, samples_per_sec=pace.rate(BATCH_SIZE * size), loss=loss.item())
        if step % COMMIT_EVERY == 0:
            if ckpt and rank == 0:
                tmp = ckpt + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, tmp)
                os.replace(tmp, ckpt)
                if reporter is not None:
                    reporter.report(step, checkpoint=os.path.abspath(ckpt))
            if rank == 0:
                acc = validation_accuracy(model, val)
                path = save_model(model, step, keep=lambda: kept(reporter, resumed))
                if reporter is not None:
                    reporter.report(step, metric="accuracy", value=acc, checkpoint=path)
            if STOP_FILE:
                flag = torch.tensor([stop_requested()])
                dist.all_reduce(flag)
                if flag.item() > 0:
                    break
        time.sleep(STEP_SLEEP + SYNC_SLEEP * (size - 1))
    if reporter is not None:
        reporter.close(timeout=5)
    dist.destroy_process_group()


if __name__ == "__main__":
    if "--torchrun" in sys.argv[1:]:
        run_torchrun()
    else:
        run_horovod()
