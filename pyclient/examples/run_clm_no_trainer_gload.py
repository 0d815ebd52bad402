#!/usr/bin/env python3
"""The training loop of transformers' examples/pytorch/language-modeling/run_clm_no_trainer.py (v4.40), fed by gload:
the DataLoader over a gload.Loader goes through accelerator.prepare, checkpoints are accelerate's save_state
directories named step_N / epoch_N, and a resume computes the epoch and the batches to skip from the directory's name
and len(train_dataloader), then calls accelerator.skip_first_batches - exactly as the original does.

The lines that differ from the original's data handling (everything else is the original's loop):

    loader = gload.Loader("data/wiki", batch_size=..., keys=("input_ids", "attention_mask", "labels"))
    train_dataloader = DataLoader(loader, batch_size=None)         # was: DataLoader(train_dataset, shuffle=True, ...)
    accelerator.register_for_checkpointing(loader)                 # new: the loader's position goes into save_state

and, on accelerate < 0.34 only, Accelerator(dataloader_config=DataLoaderConfiguration(dispatch_batches=False)):
older accelerate fails in DataLoaderDispatcher.set_epoch for any DataLoader with batch_size=None (accelerate issue
3011, fixed in 0.34). gload takes skip_first_batches as the position it already holds (a no-op), leaves the batch
accelerate's wrapper reads ahead out of its saved state, and gives len(train_dataloader) as the whole epoch, so the
resumed run trains on the batches the uninterrupted run trains on, in the same epochs. One process (the wrapper
re-shards across processes, which gload refuses with a message: it already shards by rank).

    python3 run_clm_no_trainer_gload.py --dataset data/wiki --output-dir out \
        --num-train-epochs 2 --checkpointing-steps 20 [--resume-from-checkpoint out/step_20]

Each step prints "step N epoch E loss L batch CRC" so two runs can be compared step by step.
"""
import argparse
import math
import os
import sys
import zlib

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402


class TinyCausalLM(torch.nn.Module):
    """A causal LM with dropout that takes a transformers-style batch and returns the loss (use any HF model)."""

    def __init__(self, vocab: int, dim: int = 64, dropout: float = 0.1) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.drop = torch.nn.Dropout(dropout)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask=None, labels=None):  # noqa: ANN001 - transformers' signature
        x = self.drop(self.tok(input_ids))
        logits = self.head(x + self.drop(self.mlp(x)))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return loss


def _accelerator() -> Accelerator:
    import accelerate
    from packaging.version import Version

    if Version(accelerate.__version__) < Version("0.34"):
        from accelerate.utils import DataLoaderConfiguration

        return Accelerator(cpu=not torch.cuda.is_available(),
                           dataloader_config=DataLoaderConfiguration(dispatch_batches=False))
    return Accelerator(cpu=not torch.cuda.is_available())


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--addr", default=None, help="a gload serve to use (then --dataset is one of its dataset names); default: the job's own server, started for --dataset")
    p.add_argument("--dataset", default="data/wiki", help="a dataset directory (gload tokenize --out), or with --addr a dataset name")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--num-train-epochs", type=int, default=2)
    p.add_argument("--max-train-steps", type=int, default=None)
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    p.add_argument("--checkpointing-steps", default=None, help="an integer (save every N steps) or 'epoch'")
    p.add_argument("--output-dir", default="out")
    p.add_argument("--resume-from-checkpoint", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prepare-loader", action="store_true", help="pass the Loader itself to accelerator.prepare")
    p.add_argument("--stop-after", type=int, default=0, help="end the process after this step (to try resuming)")
    args = p.parse_args(argv)

    accelerator = _accelerator()
    torch.manual_seed(args.seed)
    loader = gload.Loader(*((args.addr, args.dataset) if args.addr else (args.dataset,)), batch_size=args.batch_size, max_length=args.max_length,
                          seed=args.seed,
                          keys=("input_ids", "attention_mask", "labels"))
    # generator: torch's DataLoader draws a seed from torch's global RNG for every iterator it makes unless it has a
    # generator of its own; on a resume that draw comes after load_state restored the RNG, and dropout would differ.
    train_dataloader = DataLoader(loader, batch_size=None, generator=torch.Generator())
    if args.prepare_loader:  # the other way: the Loader itself to prepare (which returns it as it is)
        train_dataloader = loader
    model = TinyCausalLM(args.vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    # --- from here on: run_clm_no_trainer.py's own code, unchanged but for the register line ---
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / (args.max_train_steps + 1))
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler)
    accelerator.register_for_checkpointing(loader)  # gload: the loader's position goes into every save_state
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
    checkpointing_steps = args.checkpointing_steps
    if checkpointing_steps is not None and checkpointing_steps.isdigit():
        checkpointing_steps = int(checkpointing_steps)

    completed_steps = 0
    starting_epoch = 0
    resume_step = None
    if args.resume_from_checkpoint:
        checkpoint_path = args.resume_from_checkpoint
        path = os.path.basename(args.resume_from_checkpoint)
        accelerator.print(f"Resumed from checkpoint: {checkpoint_path}")
        accelerator.load_state(checkpoint_path)
        training_difference = os.path.splitext(path)[0]
        if "epoch" in training_difference:
            starting_epoch = int(training_difference.replace("epoch_", "")) + 1
            resume_step = None
            completed_steps = starting_epoch * num_update_steps_per_epoch
        else:
            resume_step = int(training_difference.replace("step_", "")) * args.gradient_accumulation_steps
            starting_epoch = resume_step // len(train_dataloader)
            completed_steps = resume_step // args.gradient_accumulation_steps
            resume_step -= starting_epoch * len(train_dataloader)

    for epoch in range(starting_epoch, args.num_train_epochs):
        model.train()
        if args.resume_from_checkpoint and epoch == starting_epoch and resume_step is not None:
            if isinstance(train_dataloader, gload.Loader):  # gload: prepare(loader) - it resumed from its state
                active_dataloader = train_dataloader
            else:
                active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_step)
        else:
            active_dataloader = train_dataloader
        for step, batch in enumerate(active_dataloader):
            with accelerator.accumulate(model):
                loss = model(**batch)
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                completed_steps += 1
                crc = zlib.crc32(batch["input_ids"].cpu().numpy().tobytes())
                accelerator.print(f"step {completed_steps} epoch {epoch} loss {loss.item():.6f} batch {crc:08x}",
                                  flush=True)
            if isinstance(checkpointing_steps, int):
                if completed_steps % checkpointing_steps == 0 and accelerator.sync_gradients:
                    output_dir = os.path.join(args.output_dir, f"step_{completed_steps}")
                    accelerator.save_state(output_dir)
            if completed_steps >= args.max_train_steps or completed_steps == args.stop_after:
                break
        if completed_steps == args.stop_after:
            break
        if args.checkpointing_steps == "epoch":
            accelerator.save_state(os.path.join(args.output_dir, f"epoch_{epoch}"))
    loader.close()


if __name__ == "__main__":
    main()
