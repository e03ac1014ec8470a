#!/usr/bin/env python3
"""Tiny torchrun job: DistributedDataParallel on CPU over Gloo, synthetic data.

    torchrun --standalone --nproc_per_node 2 tools/python/smoke_torchrun.py

Each rank prints `TORCHRUN step=<n> rank=<r> world=<w> loss=<l>`; rank 0 ends
with `TORCHRUN_DONE world=<w>` after checking that all ranks hold the same
weights (DDP averaged the gradients).
"""
import os

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("SMOKE_STEPS", "5"))

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
g = torch.Generator().manual_seed(rank)
for step in range(1, STEPS + 1):
    x = torch.randn(32, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"TORCHRUN step={step} rank={rank} world={world} loss={loss.item():.5f}", flush=True)

w = model.module.weight.detach().clone()
gathered = [torch.empty_like(w) for _ in range(world)]
dist.all_gather(gathered, w)
if rank == 0:
    assert all(torch.equal(gathered[0], t) for t in gathered), "ranks diverged"
    print(f"TORCHRUN_DONE world={world}", flush=True)
dist.destroy_process_group()
