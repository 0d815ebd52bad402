#!/usr/bin/env python3
"""A plain PyTorch training loop fed by gload.

    gload tokenize --tokenizer tokenizer.json --out data/wiki wiki.jsonl.gz
    python3 train_torch.py --dataset data/wiki --epochs 2 [--resume ckpt.pt]

The Loader starts (or joins) this job's gload server for the dataset directory; --addr names a `gload serve` of
your own instead, and --dataset then one of its dataset names.

Batches arrive on the GPU (shared-memory ring, page-locked, copied on a side stream); the loop never tokenizes,
pads or collates. The checkpoint holds the loader's state, so a resumed run continues the same epoch plan exactly
where it stopped.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
p.add_argument("--dataset", default="data/wiki", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: run the epochs)")
p.add_argument("--vocab", type=int, default=128256)
p.add_argument("--resume", help="checkpoint to resume from")
p.add_argument("--save", default="ckpt.pt")
args = p.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
source = (args.addr, args.dataset) if args.addr else (args.dataset,)
loader = gload.Loader(*source, batch_size=16, pad_multiple=128, max_length=1024, seed=0, prefetch=8, transport="shm",
                      device=device, keys=("input_ids", "attention_mask", "labels"))
print("shapes this epoch:", loader.shapes())

model = nn.Sequential(nn.Embedding(args.vocab, 256), nn.Linear(256, args.vocab)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
start_epoch = 0
if args.resume:
    ckpt = torch.load(args.resume)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    loader.load_state_dict(ckpt["loader"])  # continues this epoch after its last batch
    start_epoch = ckpt["loader"]["epoch"]

step = 0
for epoch in range(start_epoch, args.epochs):
    loader.set_epoch(epoch)  # keeps a loaded state of the same epoch
    for batch in loader:
        logits = model(batch["input_ids"][:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"][:, 1:].flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 50 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.3f}")
        if args.steps and step >= args.steps:
            break
    if args.steps and step >= args.steps:
        break

# The state matches the last batch the loop received, not what the client read ahead.
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loader": loader.state_dict()}, args.save)
print(loader.report())
loader.close()
