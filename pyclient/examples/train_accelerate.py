#!/usr/bin/env python3
"""A plain Hugging Face `accelerate` loop fed by gload: accelerator.prepare(model, optimizer) only, the Loader
iterated as it is, and the loader's state saved and restored with the checkpoint by accelerate itself
(register_for_checkpointing: a Loader has state_dict/load_state_dict).

    accelerate launch train_accelerate.py --dataset data/wiki --ckpt /tmp/acc [--steps N]
    (or plain python3 on one process; each process's Loader takes its rank from the launcher's RANK/WORLD_SIZE)

Why the dataloader is not prepared here: accelerate's DataLoader wrapper re-shards an IterableDataset's batches across
processes, and gload already shards by rank (batches and pads on the server), so this loop works on any number of
processes. Batches are moved to accelerator.device here instead. On one process, preparing DataLoader(loader,
batch_size=None) works too and resumes exactly: run_clm_no_trainer_gload.py. With --ckpt, accelerator.save_state(--ckpt) every --save-every steps and at the end
writes model, optimizer, RNG and the loader's state; a later run with the same --ckpt loads them and continues.
"""
import argparse
import json
import os
import sys
import zlib

import torch
import torch.nn.functional as F
from accelerate import Accelerator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402


class TinyLM(torch.nn.Module):
    """Token embedding, one MLP block, LM head: enough to train; use any causal LM instead."""

    def __init__(self, vocab: int, dim: int = 64) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        return self.head(x + self.mlp(x))


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
    p.add_argument("--dataset", default="data/wiki", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--ckpt", default="", help="accelerate checkpoint directory (loaded when it exists)")
    p.add_argument("--save-every", type=int, default=50)
    a = p.parse_args(argv)

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    # Next-token targets (labels="shifted") for a loop that computes the loss itself; -100 = F.cross_entropy's default.
    loader = gload.Loader(*((a.addr, a.dataset) if a.addr else (a.dataset,)), batch_size=16, max_length=256, pad_multiple=64, labels="shifted",
                          keys=("input_ids", "labels"), seed=0)
    torch.manual_seed(0)
    model = TinyLM(a.vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = accelerator.prepare(model, opt)
    accelerator.register_for_checkpointing(loader)
    step = 0
    if a.ckpt and os.path.isdir(a.ckpt):
        accelerator.load_state(a.ckpt)  # model, optimizer, RNG and loader.load_state_dict
        with open(os.path.join(a.ckpt, "step.json"), encoding="utf-8") as f:
            step = json.load(f)["step"]
    while step < a.steps:
        for batch in loader:
            x = batch["input_ids"].to(accelerator.device)
            y = batch["labels"].to(accelerator.device)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            opt.zero_grad(set_to_none=True)
            accelerator.backward(loss)
            opt.step()
            step += 1
            # The per-step line: loss and a checksum of the batch, so two runs can be compared step by step.
            accelerator.print(f"step {step} loss {loss.item():.6f} batch {zlib.crc32(x.cpu().numpy().tobytes()):08x} "
                              f"epoch {loader.epoch}", flush=True)
            if a.ckpt and (step % a.save_every == 0 or step == a.steps):
                accelerator.save_state(a.ckpt)
                if accelerator.is_main_process:
                    with open(os.path.join(a.ckpt, "step.json"), "w", encoding="utf-8") as f:
                        json.dump({"step": step}, f)
            if step >= a.steps:
                break
        else:
            loader.set_epoch(loader.epoch + 1)
    loader.close()


if __name__ == "__main__":
    main()
