#!/usr/bin/env python3
"""Hugging Face Trainer fed by gload: gload.hf.GloadTrainer, a drop-in Trainer that keeps the loader's state in every
checkpoint and resumes it exactly.

    python3 hf_trainer.py --dataset data/wiki --out /tmp/run [--resume]
    (or torchrun --nproc-per-node N hf_trainer.py ...: each rank's Loader picks up its rank)

The Loader's batch size and seed come from TrainingArguments (per_device_train_batch_size, seed) because the Loader
is not given them; a setting given to both must agree (GloadTrainer says which otherwise).
"""
import argparse
import os
import sys

from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402
from gload.hf import GloadTrainer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
    p.add_argument("--dataset", default="data/wiki", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
    p.add_argument("--out", default="/tmp/gload-hf")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--vocab", type=int, default=4096, help="the tokenizer's vocabulary (4096: examples/udhr)")
    p.add_argument("--resume", action="store_true")
    a = p.parse_args()

    loader = gload.Loader(*((a.addr, a.dataset) if a.addr else (a.dataset,)), pad_multiple=128, max_length=512)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=a.vocab, n_positions=512, n_layer=2, n_head=4, n_embd=128))
    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, save_steps=max(a.steps // 2, 1), logging_steps=10,
                             report_to=[], per_device_train_batch_size=8, seed=0)
    trainer = GloadTrainer(model=model, args=args, train_dataset=loader)
    trainer.train(resume_from_checkpoint=True if a.resume and os.path.isdir(a.out) else None)
    print(loader.report(gpu=False))
    loader.close()


if __name__ == "__main__":
    main()
