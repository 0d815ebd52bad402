#!/usr/bin/env python3
"""DDP training fed by one gload server: each rank pulls its own exactly-once share over shared memory.

The model and step are train_ref.py's (a small GPT, 8 layers, d=768, Llama-3 vocabulary, bf16 autocast, fused AdamW),
wrapped in DistributedDataParallel (NCCL). Run under torchrun:

    torchrun --nproc-per-node N bench/train_ddp.py --addr unix:///tmp/gload.sock --dataset corpus [--ideal]
             [--slow-rank R --slow-ms MS] [--json out.jsonl]

--ideal stages each rank's batches on its GPU before timing (the ceiling no loader beats); --slow-rank makes one rank's
data path slow on purpose (prefetch 1 and MS of extra delay before each of its batches) so that the watch must name it.
Each rank prints one JSON line: steps, step ms, data-wait share, real tokens/s.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--addr", required=True)
p.add_argument("--dataset", default="corpus")
p.add_argument("--steps", type=int, default=100)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--pad-multiple", type=int, default=128)
p.add_argument("--vocab", type=int, default=128256)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--dim", type=int, default=768)
p.add_argument("--ideal", action="store_true")
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--slow-ms", type=float, default=0)
p.add_argument("--json")
p.add_argument("--label", default="")
args = p.parse_args()

from gload import Loader  # noqa: E402  (PYTHONPATH holds pyclient/)


class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__()
        s.ln1, s.ln2, s.h = nn.LayerNorm(d), nn.LayerNorm(d), h
        s.qkv, s.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(s, x):
        B, T, D = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        x = x + s.o(a)
        return x + s.ff(s.ln2(x))


class GPT(nn.Module):
    def __init__(s, vocab):
        super().__init__()
        s.emb = nn.Embedding(vocab, args.dim)
        s.blocks = nn.ModuleList([Block(args.dim, 12) for _ in range(args.layers)])
        s.ln = nn.LayerNorm(args.dim)

    def forward(s, x):
        h = s.emb(x)
        for b in s.blocks:
            h = b(h)
        return s.ln(h) @ s.emb.weight.T


def main():
    dist.init_process_group("nccl")
    rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    slow = rank == args.slow_rank
    loader = Loader(args.addr, args.dataset, batch_size=args.batch_size, pad_multiple=args.pad_multiple,
                    max_length=args.seq, transport="shm", device=dev, prefetch=1 if slow else 8, labels=False,
                    keys=("input_ids", "attention_mask"), client_id=f"rank{rank}")

    def batches():
        epoch = 0
        while True:
            loader.set_epoch(epoch)
            for b in loader:
                yield b["input_ids"], b["attention_mask"]
            epoch += 1

    it = batches()
    if args.ideal:
        staged = [next(it) for _ in range(args.warmup + args.steps)]
        it = iter(staged)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(GPT(args.vocab).to(dev), device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    waits, real = [], 0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
        tw = time.perf_counter()
        if slow:
            time.sleep(args.slow_ms / 1000)
        x, m = next(it)
        wait = time.perf_counter() - tw
        x, m = x.to(dev, non_blocking=True).long(), m.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), reduction="none")
            loss = (loss * m[:, 1:].reshape(-1)).sum() / m[:, 1:].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            waits.append(wait)
            real += int(m.sum())
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    row = {"label": args.label, "rank": rank, "world": world, "ideal": args.ideal, "slow": slow, "steps": args.steps,
           "step_ms": 1000 * wall / args.steps, "data_wait_pct": 100 * sum(waits) / wall, "tokens_per_s": real / wall}
    rows = [None] * world
    dist.all_gather_object(rows, row)
    if rank == 0:
        for r in rows:
            print(json.dumps(r), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
    loader.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
