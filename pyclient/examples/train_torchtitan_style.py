#!/usr/bin/env python3
"""A hand-written torch.distributed loop in the style of torchtitan, fed by gload: every rank opens its own Loader
shard (rank and world size from the launcher's RANK/WORLD_SIZE), trains a DDP-wrapped model, all-reduces the loss each
step for the log, and rank 0 checkpoints model, optimizer and loader.state_dict() (global: the same on every rank).

    torchrun --nproc-per-node 2 train_torchtitan_style.py --dataset data/wiki \
        --ckpt /tmp/titan.pt [--steps N | --epochs 1]

The backend is gloo on CPU, nccl where CUDA is available. The server plans every rank's share of each epoch, so all
ranks get the same number of batches (a rank running dry early would hang the collectives) and each row goes to one
rank. The checkpoint is loaded by every rank when it exists; a resume may use another world size (the server
re-splits what is left of the epoch). --rows-out FILE gathers the dataset rows each rank trained on to rank 0 and
writes them there as JSON, to check that every row came once.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402


class TinyLM(torch.nn.Module):
    def __init__(self, vocab: int, dim: int = 32) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(), torch.nn.Linear(2 * dim, dim))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        return self.head(x + self.mlp(x))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
    p.add_argument("--dataset", default="data/wiki", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: --epochs)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--ckpt", default="")
    p.add_argument("--save-every", type=int, default=50)
    p.add_argument("--rows-out", default="")
    a = p.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    loader = gload.Loader(*((a.addr, a.dataset) if a.addr else (a.dataset,)), batch_size=a.batch_size, max_length=256, pad_multiple=16, seed=0,
                          rank=rank, world_size=world, labels="shifted", keys=("input_ids", "labels", "index"),
                          client_id=f"titan-rank{rank}")
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = torch.nn.parallel.DistributedDataParallel(TinyLM(a.vocab).to(device),
                                                      device_ids=[device.index] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    if a.ckpt and os.path.exists(a.ckpt):
        ck = torch.load(a.ckpt, map_location=device)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        loader.load_state_dict(ck["loader"])
        step = ck["step"]

    def save() -> None:
        if rank == 0:  # the loader state is global: rank 0's is every rank's
            tmp = a.ckpt + ".tmp"
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "loader": loader.state_dict(),
                        "step": step}, tmp)
            os.replace(tmp, a.ckpt)
        dist.barrier()

    rows, steps_here, done = [], 0, False
    while not done:
        for batch in loader:
            x, y = batch["input_ids"].to(device), batch["labels"].to(device)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces the gradients
            opt.step()
            step += 1
            steps_here += 1
            rows += [int(i) for i in batch["index"]]
            mean = loss.detach().clone()
            dist.all_reduce(mean)  # the per-step loss, averaged over ranks, for the log
            if rank == 0 and (step % 10 == 0 or step == 1):
                print(f"step {step} loss {mean.item() / world:.4f} epoch {loader.epoch}", flush=True)
            if a.ckpt and step % a.save_every == 0:
                save()
            if a.steps and step >= a.steps:
                done = True
                break
        else:
            if not a.steps and loader.epoch + 1 >= a.epochs:
                done = True
            else:
                loader.set_epoch(loader.epoch + 1)
    if a.ckpt:
        save()
    print(f"rank {rank} of {world}: {steps_here} steps in this run, step {step}", flush=True)
    if a.rows_out:
        gathered = [None] * world
        dist.all_gather_object(gathered, {"rank": rank, "steps": steps_here, "rows": rows})
        if rank == 0:
            with open(a.rows_out, "w", encoding="utf-8") as f:
                json.dump(gathered, f)
    loader.close()
    del model, opt  # torch 1.13's DDP hangs at exit when its reducer outlives the process group
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
