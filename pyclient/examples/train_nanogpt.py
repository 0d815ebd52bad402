#!/usr/bin/env python3
"""A nanoGPT-style loop fed by gload: the model returns logits, the loop computes the loss itself, so the targets are
next-token targets (labels="shifted") with nanoGPT's ignore index -1.

    gload serve --dataset wiki=/data/wiki --listen unix:///tmp/gload.sock &
    python3 train_nanogpt.py --addr unix:///tmp/gload.sock --dataset wiki --steps 100 [--ckpt ckpt.pt]

The model is a small causal Transformer (torch.nn only); swap in nanoGPT's GPT and nothing else changes. With --ckpt
the loader's state is saved beside the model's every --save-every steps and loaded when the file exists.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int, dim: int = 64, layers: int = 2, heads: int = 4, max_len: int = 1024) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(max_len, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        n = idx.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf"), device=idx.device), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(n, device=idx.device))
        return self.head(self.blocks(x, mask=causal))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default="unix:///tmp/gload.sock")
    p.add_argument("--dataset", default="wiki")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--ckpt", default="")
    p.add_argument("--save-every", type=int, default=50)
    a = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    loader = gload.Loader(a.addr, a.dataset, batch_size=16, max_length=256, pad_multiple=64, labels="shifted",
                          ignore_index=-1, keys=("input_ids", "labels"), device=device if device == "cuda" else None)
    torch.manual_seed(0)
    model = TinyGPT(a.vocab, max_len=256).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    if a.ckpt and os.path.exists(a.ckpt):
        ck = torch.load(a.ckpt)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        loader.load_state_dict(ck["loader"])
        step = ck["step"]
    while step < a.steps:
        for batch in loader:
            x, y = batch["input_ids"].to(device), batch["labels"].to(device)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), ignore_index=-1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0 or step == a.steps:
                print(f"step {step} loss {loss.item():.4f} {loader.progress()['left']} batches left in epoch "
                      f"{loader.epoch}", flush=True)
            if a.ckpt and (step % a.save_every == 0 or step == a.steps):
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loader": loader.state_dict(),
                            "step": step}, a.ckpt)
            if step >= a.steps:
                break
        else:
            loader.set_epoch(loader.epoch + 1)
    loader.close()


if __name__ == "__main__":
    main()
