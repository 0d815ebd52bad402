#!/usr/bin/env python3
"""TRL's SFTTrainer on a dataset written by `gload tokenize --format chat`, read with datasets.load_from_disk: the one
line gload adds is the collator (TRL 0.9's default one cannot pad the stored labels column; TRL 1.x's pads them
as stored, and this collator works with both).

    gload tokenize --format chat --tokenizer tok/tokenizer.json --out sft_ds conversations.jsonl
    python3 trl_sft.py --dataset sft_ds --tokenizer tok --out out [--model gpt2] [--steps 100]

gload.hf.SFTCollator pads input_ids with the pad token the dataset recorded, labels with -100, and keeps the stored
labels as they are: the loss is on the assistant's turns, end-of-turn tokens included (docs/integrations.md says where
this differs from TRL's DataCollatorForCompletionOnlyLM). Without --model a tiny GPT-2 is built from a config.
"""
import argparse
import inspect
import os
import sys

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel
from trl import SFTConfig, SFTTrainer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload.hf  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True, help="a directory written by gload tokenize --format chat")
    p.add_argument("--tokenizer", required=True, help="a directory AutoTokenizer loads (tokenizer.json and config)")
    p.add_argument("--model", default="", help="a model AutoModelForCausalLM loads (default: a tiny GPT-2)")
    p.add_argument("--out", default="out")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=4)
    a = p.parse_args(argv)

    ds = datasets.load_from_disk(a.dataset)
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    if a.model:
        model = AutoModelForCausalLM.from_pretrained(a.model)
    else:
        torch.manual_seed(0)
        longest = max(ds["length"]) if "length" in ds.column_names else 1024
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=max(64, longest), n_layer=1, n_head=2,
                                           n_embd=32))
    cfg = dict(output_dir=a.out, per_device_train_batch_size=a.batch_size, max_steps=a.steps, report_to=[],
               learning_rate=1e-3, logging_steps=max(1, a.steps // 10), save_strategy="no")
    cfg["max_seq_length" if "max_seq_length" in SFTConfig.__dataclass_fields__ else "max_length"] = 4096  # TRL 0.20
    # SFTTrainer takes the tokenizer as processing_class since TRL 0.12, as tokenizer before.
    params = inspect.signature(SFTTrainer.__init__).parameters
    tok_arg = "processing_class" if "processing_class" in params else "tokenizer"
    if not torch.cuda.is_available():
        cfg["use_cpu" if "use_cpu" in SFTConfig.__dataclass_fields__ else "no_cuda"] = True
    trainer = SFTTrainer(model=model, args=SFTConfig(**cfg), train_dataset=ds, **{tok_arg: tok},
                         data_collator=gload.hf.SFTCollator(dataset=ds))  # gload: the one added line
    return trainer.train()


if __name__ == "__main__":
    main()
