#!/usr/bin/env python3
"""Hugging Face Trainer fed by gload: override get_train_dataloader, keep the loader's state in checkpoints.

    gload serve --dataset wiki=/data/wiki &   # listens on the user's private socket (gload.default_address())
    python3 hf_trainer.py --dataset wiki --out /tmp/run [--resume]
    (or torchrun --nproc-per-node N hf_trainer.py ...: each rank's Loader picks up its rank)

The Loader is iterated in the main process (DataLoader with num_workers=0: gload already prefetches on a thread), so
``loader.state_dict()`` matches the last batch the Trainer took. It is saved beside each checkpoint and loaded on
resume, with ``ignore_data_skip`` so that the Trainer does not replay the epoch to skip batches.
"""
import argparse
import os
import sys

import torch
from torch.utils.data import DataLoader
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402

STATE_FILE = "gload_state.pt"


class GloadTrainer(Trainer):
    def __init__(self, *a, loader: gload.Loader, **kw):
        super().__init__(*a, **kw)
        self.loader = loader

    def get_train_dataloader(self) -> DataLoader:
        # batch_size=None: the batches are already batched (and padded) by the server.
        return DataLoader(self.loader, batch_size=None, num_workers=0)


class SaveLoaderState(TrainerCallback):
    def __init__(self, loader: gload.Loader):
        self.loader = loader

    def on_save(self, args, state, control, **kw):
        ckpt = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if state.is_world_process_zero and os.path.isdir(ckpt):
            torch.save(self.loader.state_dict(), os.path.join(ckpt, STATE_FILE))

    def on_epoch_begin(self, args, state, control, **kw):
        self.loader.set_epoch(int(state.epoch or 0))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="gload server (default: gload serve's default socket, or $GLOAD_ADDR)")
    p.add_argument("--dataset", default="wiki")
    p.add_argument("--out", default="/tmp/gload-hf")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--resume", action="store_true")
    a = p.parse_args()

    loader = gload.Loader(a.addr, a.dataset, batch_size=8, pad_multiple=128, max_length=512,
                          keys=("input_ids", "attention_mask", "labels"))  # what the model's forward takes
    model = GPT2LMHeadModel(GPT2Config(vocab_size=a.vocab, n_positions=512, n_layer=2, n_head=4, n_embd=128))
    last = get_last_checkpoint(a.out) if a.resume and os.path.isdir(a.out) else None
    if last and os.path.exists(os.path.join(last, STATE_FILE)):
        loader.load_state_dict(torch.load(os.path.join(last, STATE_FILE)))
    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, save_steps=max(a.steps // 2, 1), logging_steps=10,
                             report_to=[], ignore_data_skip=True, dataloader_num_workers=0,
                             per_device_train_batch_size=1)  # ignored: the server batches
    trainer = GloadTrainer(model=model, args=args, loader=loader, callbacks=[SaveLoaderState(loader)])
    trainer.train(resume_from_checkpoint=last)
    print(loader.report(gpu=False))
    loader.close()


if __name__ == "__main__":
    main()
