#!/usr/bin/env python3
"""Tiny elastic Horovod training job: PyTorch on CPU, synthetic data, Gloo.

Run it under horovodrun in elastic mode, e.g.

    horovodrun --gloo -np 2 --min-np 1 --max-np 3 \
        --host-discovery-script tools/python/discover_hosts.sh \
        python tools/python/smoke_elastic.py

Every step prints one line that the smoke test (tools/python/smoke.sh) parses:

    SMOKE step=<n> epoch=<e> batch=<b> rank=<r> size=<hvd.size()> pid=<pid> host=<h> loss=<l>

and rank 0 prints `SMOKE_DONE ...` once training finished. The pid shows
whether a worker process survived a rescale (elastic reset) or was restarted.

Knobs (environment): SMOKE_EPOCHS (default 2), SMOKE_BATCHES (batches per
epoch, default 10), SMOKE_STEP_SECONDS (sleep per step so that a rescale can
be observed, default 0.2), SMOKE_COMMIT_EVERY (commit state every N batches,
default 1; host updates are only seen at a commit).
"""
import os
import time

import torch
import horovod.torch as hvd

EPOCHS = int(os.environ.get("SMOKE_EPOCHS", "2"))
BATCHES = int(os.environ.get("SMOKE_BATCHES", "10"))
STEP_SECONDS = float(os.environ.get("SMOKE_STEP_SECONDS", "0.2"))
COMMIT_EVERY = int(os.environ.get("SMOKE_COMMIT_EVERY", "1"))
BATCH_SIZE = 32
HOST = os.environ.get("HOROVOD_HOSTNAME", "?")  # the host name horovodrun assigned
BASE_LR = 0.05

hvd.init()
torch.manual_seed(1234)
torch.set_num_threads(1)

# y = x . w_true + 0.5 (+ noise): a linear model can learn it.
W_TRUE = torch.arange(1, 9, dtype=torch.float32).unsqueeze(1) / 8.0

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
loss_fn = torch.nn.MSELoss()


def synthetic_batch(step, rank):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(BATCH_SIZE, 8, generator=g)
    y = x @ W_TRUE + 0.5 + 0.01 * torch.randn(BATCH_SIZE, 1, generator=g)
    return x, y


def on_state_reset():
    # The world size changed: rescale the learning rate.
    for group in optimizer.param_groups:
        group["lr"] = BASE_LR * hvd.size()
    print(f"SMOKE_RESET rank={hvd.rank()} size={hvd.size()} pid={os.getpid()}", flush=True)


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, epoch=0, batch=0, step=0)
state.register_reset_callbacks([on_state_reset])


@hvd.elastic.run
def train(state):
    loss = torch.tensor(float("nan"))
    for state.epoch in range(state.epoch, EPOCHS):
        for state.batch in range(state.batch, BATCHES):
            x, y = synthetic_batch(state.step, hvd.rank())
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            state.step += 1
            print(f"SMOKE step={state.step} epoch={state.epoch} batch={state.batch} "
                  f"rank={hvd.rank()} size={hvd.size()} pid={os.getpid()} host={HOST} loss={loss.item():.5f}",
                  flush=True)
            time.sleep(STEP_SECONDS)
            if state.step % COMMIT_EVERY == 0:
                # Saves the state and raises HostsUpdatedInterrupt when the
                # launcher announced added/removed hosts.
                state.commit()
        state.batch = 0
    return loss.item()


final_loss = train(state)
if hvd.rank() == 0:
    print(f"SMOKE_DONE size={hvd.size()} steps={state.step} loss={final_loss:.5f} pid={os.getpid()}",
          flush=True)
