#!/usr/bin/env python3
"""Distributed data parallel training fed by gload: one Loader per rank.

    gload serve --dataset wiki=/data/wiki &   # listens on the user's private socket (gload.default_address())
    torchrun --nproc-per-node 8 train_ddp.py --dataset wiki

Each Loader takes its rank and world size from torch.distributed: global batch g of the epoch plan goes to rank
g mod world_size, every rank gets the same number of batches (collective ops never hang on an uneven tail), and
each row comes once per epoch. The resume state is global: rank 0 saves it, and a job restarted on another number of
GPUs loads it on every rank and continues the same plan with nothing lost or repeated.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
p.add_argument("--dataset", default="data/wiki", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--steps", type=int, default=0)
p.add_argument("--vocab", type=int, default=128256)
p.add_argument("--resume")
p.add_argument("--save", default="ddp_ckpt.pt")
args = p.parse_args()

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)

# One server per node: every local rank uses the node's socket (shared memory needs the same host).
loader = gload.Loader(*((args.addr, args.dataset) if args.addr else (args.dataset,)), batch_size=16, pad_multiple=128, max_length=1024, device=device,
                      transport="shm" if args.addr.startswith("unix:") else "grpc",
                      keys=("input_ids", "labels"))
model = nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Embedding(args.vocab, 256), nn.Linear(256, args.vocab)).to(device),
    device_ids=[device.index] if cuda else None)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
start_epoch = 0
if args.resume:
    ckpt = torch.load(args.resume, map_location="cpu")
    model.module.load_state_dict(ckpt["model"])
    loader.load_state_dict(ckpt["loader"])  # the same global state on every rank, whatever the new world size
    start_epoch = ckpt["loader"]["epoch"]

step = 0
for epoch in range(start_epoch, args.epochs):
    loader.set_epoch(epoch)
    for batch in loader:
        logits = model(batch["input_ids"][:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"][:, 1:].flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if args.steps and step >= args.steps:
            break
    if args.steps and step >= args.steps:
        break

state = loader.state_dict()  # identical on every rank (ranks run in lockstep)
if rank == 0:
    torch.save({"model": model.module.state_dict(), "loader": state}, args.save)
    print(loader.report())
loader.close()
del model  # before the process group goes (some torch versions deadlock tearing DDP down after it)
dist.destroy_process_group()
