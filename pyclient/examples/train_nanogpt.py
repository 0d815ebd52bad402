#!/usr/bin/env python3
"""nanoGPT's train.py loop fed by gload, resumable exactly: the model returns logits, the loop computes the loss
itself, so the targets are next-token targets (labels="shifted") with nanoGPT's ignore index -1.

    python3 train_nanogpt.py --dataset data/train --val-dataset data/val --max-iters 200 \
        --out-dir out [--init-from resume]

What differs from nanoGPT's train.py, and why (nanoGPT's get_batch('train') fetches the next batch *before* the step
that trains on it, and its estimate_loss() draws batches from the training stream):

1. get_batch('train') is ``next()`` of the training Loader, and it keeps ``loader.state_dict()`` taken just before
   the fetch: the position after every batch trained so far, which is what the checkpoint saves. Saving
   ``loader.state_dict()`` at checkpoint time instead would count the batch already fetched for the next step (and,
   without 2., the batches estimate_loss drew): the resumed run would skip them.
2. estimate_loss() reads its own Loaders (``eval=True``: the dataset in order, the same first eval_iters batches every
   time), never the training stream. ``--val-dataset`` defaults to the training dataset.
3. An epoch's end: the next ``iter(loader)`` runs the next epoch by itself (a state saved at an epoch's end resumes
   at the next epoch's start).

The model is a small causal Transformer (torch.nn only); swap in nanoGPT's GPT and nothing else changes. Each
iteration prints "iter N loss L" so two runs can be compared step by step.
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

    def forward(self, idx: torch.Tensor, targets: torch.Tensor = None):
        n = idx.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf"), device=idx.device), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(n, device=idx.device))
        logits = self.head(self.blocks(x, mask=causal))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
    p.add_argument("--dataset", default="data/train", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
    p.add_argument("--val-dataset", default="")
    p.add_argument("--out-dir", default="out")
    p.add_argument("--init-from", default="scratch", choices=["scratch", "resume"])
    p.add_argument("--max-iters", type=int, default=100)
    p.add_argument("--eval-interval", type=int, default=20)
    p.add_argument("--eval-iters", type=int, default=4)
    p.add_argument("--gradient-accumulation-steps", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--stop-after", type=int, default=0, help="end the process after this iteration (to try resuming)")
    p.add_argument("--naive-state", action="store_true",
                   help="save loader.state_dict() at checkpoint time (loses the batch fetched ahead; for comparison)")
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    def make_loader(dataset: str, **kw) -> gload.Loader:
        return gload.Loader(*((a.addr, dataset) if a.addr else (dataset,)), batch_size=a.batch_size, max_length=a.block_size, pad_multiple=64,
                            labels="shifted", ignore_index=-1, keys=("input_ids", "labels"),
                            device=device if device == "cuda" else None, **kw)

    train_loader = make_loader(a.dataset, seed=1337)
    eval_loaders = {"train": make_loader(a.dataset, eval=True), "val": make_loader(a.val_dataset or a.dataset,
                                                                                   eval=True)}
    train_iter = None
    trained_state = None  # the training stream's position after the batches trained so far

    def get_batch(split: str):
        nonlocal train_iter, trained_state
        assert split == "train", "estimate_loss reads eval_loaders"
        if train_iter is None:
            train_iter = iter(train_loader)
        trained_state = train_loader.state_dict()  # gload: before the fetch, the batch fetched is not trained yet
        try:
            b = next(train_iter)
        except StopIteration:  # the epoch's end: a new iteration runs the next epoch
            train_iter = iter(train_loader)
            b = next(train_iter)
        return b["input_ids"], b["labels"]

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split, loader in eval_loaders.items():
            losses = [model(b["input_ids"], b["labels"])[1].item() for _, b in zip(range(a.eval_iters), loader)]
            out[split] = sum(losses) / len(losses)
        model.train()
        return out

    iter_num, best_val_loss = 0, 1e9
    torch.manual_seed(1337)
    model = TinyGPT(a.vocab, max_len=a.block_size).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ckpt_path = os.path.join(a.out_dir, "ckpt.pt")
    if a.init_from == "resume":
        checkpoint = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        iter_num, best_val_loss = checkpoint["iter_num"], checkpoint["best_val_loss"]
        train_loader.load_state_dict(checkpoint["loader"])  # gload: where the training stream stood

    X, Y = get_batch("train")  # fetch the very first batch
    while True:
        if iter_num % a.eval_interval == 0:
            losses = estimate_loss()
            print(f"eval {iter_num}: train loss {losses['train']:.6f}, val loss {losses['val']:.6f}", flush=True)
            if iter_num > 0:
                best_val_loss = min(best_val_loss, losses["val"])
                os.makedirs(a.out_dir, exist_ok=True)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": iter_num,
                            "best_val_loss": best_val_loss,
                            "loader": train_loader.state_dict() if a.naive_state else trained_state}, ckpt_path)
        for _ in range(a.gradient_accumulation_steps):
            _, loss = model(X, Y)
            loss = loss / a.gradient_accumulation_steps
            X, Y = get_batch("train")  # prefetch the next batch while the step runs (nanoGPT's order)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        print(f"iter {iter_num} loss {loss.item() * a.gradient_accumulation_steps:.6f} epoch {train_loader.epoch}",
              flush=True)
        if iter_num >= a.max_iters or iter_num == a.stop_after:
            break
    train_loader.close()
    for loader in eval_loaders.values():
        loader.close()


if __name__ == "__main__":
    main()
