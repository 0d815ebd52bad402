#!/usr/bin/env python3
"""Supervised fine-tuning (SFT) with the Hugging Face Trainer fed by gload: conversations tokenized offline by
`gload tokenize --format chat` carry `labels` (-100 outside the assistant's turns), the server pads them with -100,
and gload.hf.GloadTrainer hands them to the model as they are, so the loss covers only the assistant's tokens.

    gload tokenize --format chat --tokenizer tokenizer.json --chat-template tokenizer_config.json \
        --out data/sft sft.jsonl
    python3 hf_trainer_sft.py --dataset data/sft --vocab 4096 --out /tmp/sft [--resume]

The model is a tiny causal LM built from a config in code (no hub download); load your own with
AutoModelForCausalLM.from_pretrained and give its tokenizer's vocabulary instead. GPT2LMHeadModel shifts the labels
itself, so gload's unshifted labels are what it wants. The loader's state is saved in every checkpoint and --resume
continues from the last one exactly.
"""
import argparse
import math
import os
import sys

from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402
from gload.hf import GloadTrainer  # noqa: E402


def make_trainer(addr: str, dataset: str, out: str, steps: int, vocab: int, save_steps: int = 0,
                 trainer_cls: type = GloadTrainer) -> GloadTrainer:
    """The loader, the tiny model and the trainer (trainer_cls: GloadTrainer or a subclass of it)."""
    import torch

    # Default keys are input_ids, attention_mask, labels: what the model's forward takes. With a labels column in the
    # dataset, `labels` is the stored SFT mask (-100 where not trained, and at padding), not derived from input_ids.
    loader = gload.Loader(*((addr, dataset) if addr else (dataset,)), max_length=512, pad_multiple=32, transport="grpc")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=512, n_layer=1, n_head=2, n_embd=64))
    kw = dict(output_dir=out, max_steps=steps, save_steps=save_steps or max(steps // 2, 1), logging_steps=1,
              report_to=[], per_device_train_batch_size=8, learning_rate=1e-3, seed=0, disable_tqdm=True,
              dataloader_num_workers=0)
    if "use_cpu" not in TrainingArguments.__dataclass_fields__:  # transformers < 4.34 says no_cuda
        kw["no_cuda"] = not torch.cuda.is_available()
    return trainer_cls(model=model, args=TrainingArguments(**kw), train_dataset=loader)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
    p.add_argument("--dataset", default="data/sft", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
    p.add_argument("--out", default="/tmp/gload-sft")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--save-steps", type=int, default=0, help="default: half of --steps")
    p.add_argument("--vocab", type=int, default=4096, help="the tokenizer's vocabulary size")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    a = p.parse_args()

    trainer = make_trainer(a.addr, a.dataset, a.out, a.steps, a.vocab, a.save_steps)
    res = trainer.train(resume_from_checkpoint=True if a.resume and os.path.isdir(a.out) else None)
    print(f"sft done: step {trainer.state.global_step} train_loss {res.training_loss:.4f}", flush=True)
    if not math.isfinite(res.training_loss):
        sys.exit("training loss is not finite")
    print(trainer.gload_loader.report(gpu=False))
    trainer.gload_loader.close()


if __name__ == "__main__":
    main()
