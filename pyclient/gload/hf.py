"""Hugging Face Trainer integration: ``GloadTrainer``, a drop-in ``transformers.Trainer`` that trains from a
:class:`gload.Loader` and resumes it exactly from every checkpoint.

    from gload import Loader
    from gload.hf import GloadTrainer
    trainer = GloadTrainer(model=model, args=args, train_dataset=Loader(addr, "wiki"))
    trainer.train(resume_from_checkpoint=True)      # or None

What it does, and why:

- The Loader's batches are already batched, padded and sharded by rank, so they go to the training loop through a
  ``DataLoader(loader, batch_size=None, num_workers=0)`` that is *not* wrapped by accelerate: accelerate's wrapper
  reads one batch ahead, which would leave ``loader.state_dict()`` one batch past what the Trainer trained on.
  Batches are moved to the device by the Trainer itself, as for any dataset. (A plain ``Trainer(train_dataset=loader)``
  fails at its first step with an error that names this class.)
- ``TrainingArguments`` stay meaningful: settings the Loader was not given are taken from them
  (``per_device_train_batch_size`` → ``batch_size``, ``data_seed`` or ``seed`` → ``seed``, ``dataloader_drop_last``
  → ``remainder`` "drop" or "wrap"), and a setting given to both must agree, or the constructor raises naming both.
  What it cannot honour is refused by name: ``group_by_length`` (gload's bucketed policy already groups by length),
  ``dataloader_num_workers`` > 0 (gload prefetches on a thread; workers would hide the consumed position),
  ``per_device_train_batch_size`` under the token-budget policy (batches have no fixed row count).
- Every checkpoint gets ``gload_state.json`` (the loader's resume state, global and small: the same on every rank);
  ``train(resume_from_checkpoint=...)`` loads it, and the Trainer runs with ``ignore_data_skip`` (set on its own
  copy of the ``TrainingArguments``; the object passed in is not changed) so it does not replay the epoch to skip
  batches: the batches after the resume are those an uninterrupted run trains on next. The DataLoader it iterates
  has a ``torch.Generator`` of its own, so making its iterator draws nothing from torch's global RNG, which the
  Trainer restored from the checkpoint just before: with dropout on, the losses after a resume are those of the
  uninterrupted run too.
- The epoch the Trainer is in goes to ``loader.set_epoch``.

For a gload SFT dataset read with ``datasets.load_from_disk`` by another trainer (TRL's ``SFTTrainer``, a plain
``Trainer``): :class:`SFTCollator` pads it as the server would (input_ids with the recorded pad id, labels with -100).

``import gload.hf`` is light: transformers is imported when ``GloadTrainer`` is first used.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, List, Optional

from .loader import Loader

STATE_FILE = "gload_state.json"

__all__ = ["GloadTrainer", "SFTCollator", "STATE_FILE", "check_args", "load_state", "save_state", "stored_pad_id"]

# Bounds on what a collator pads: a row longer than this, or a batch holding more tokens, is an error naming it.
_MAX_ROW_TOKENS = 1 << 24
_MAX_BATCH_TOKENS = 1 << 30


def _dataset_dir(dataset: Any) -> str:
    """The directory of a dataset given as a path or as a ``datasets.Dataset`` opened with ``load_from_disk``."""
    if isinstance(dataset, (str, os.PathLike)):
        return os.fspath(dataset)
    files = getattr(dataset, "cache_files", None) or []
    if files and isinstance(files[0], dict) and files[0].get("filename"):
        return os.path.dirname(files[0]["filename"])
    raise ValueError(f"stored_pad_id: want a dataset directory or a datasets.Dataset opened with load_from_disk, got "
                     f"{type(dataset).__name__} (an in-memory dataset has no directory: pass pad_id)")


def stored_pad_id(dataset: Any) -> Optional[int]:
    """The pad token id ``gload tokenize`` recorded in a dataset (``dataset_info.json``, key ``gload``: the
    tokenizer's pad token, else its eos token, else the ``--pad-id`` given); None when it recorded none (a dataset
    Hugging Face wrote). ``dataset``: the directory, or the ``datasets.Dataset`` ``load_from_disk`` opened from it."""
    path = os.path.join(_dataset_dir(dataset), "dataset_info.json")
    with open(path, encoding="utf-8") as f:
        info = json.load(f)
    g = info.get("gload") if isinstance(info, dict) else None
    if not isinstance(g, dict) or not g.get("pad_from"):
        return None
    pad = g.get("pad_token_id")
    if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
        raise ValueError(f"{path}: gload.pad_token_id is {pad!r}: want a token id")
    return pad


class SFTCollator:
    """Pads rows of a gload dataset read with ``datasets.load_from_disk`` (TRL's ``SFTTrainer``, a plain
    ``Trainer``, any DataLoader) the way gload's server pads its batches: ``input_ids`` with the pad id, ``labels``
    — the stored SFT labels, or ``input_ids`` where the dataset has none — with ``ignore_index`` (-100) at padding,
    ``attention_mask`` 1 on real tokens. Stored labels are kept as they are: a -100 the dataset holds stays -100, and
    no token is masked for being equal to the pad id (so with pad = eos every turn's end stays trained, unlike
    DataCollatorForLanguageModeling).

        ds = datasets.load_from_disk(sft_dir)
        trainer = SFTTrainer(model, args=cfg, train_dataset=ds, data_collator=gload.hf.SFTCollator(dataset=ds))

    ``pad_id`` None takes the pad id recorded in ``dataset`` (see :func:`stored_pad_id`); ``pad_multiple`` pads
    lengths up to a multiple (1: the longest row). Returns torch tensors (int64), numpy arrays with
    ``return_tensors="np"``. Other columns are dropped.
    """

    def __init__(self, pad_id: Optional[int] = None, *, dataset: Any = None, pad_multiple: int = 1,
                 ignore_index: int = -100, return_tensors: str = "pt") -> None:
        if pad_id is None:
            if dataset is None:
                raise ValueError("SFTCollator: give pad_id, or the dataset (its directory or the datasets.Dataset "
                                 "load_from_disk opened) whose recorded pad id to use")
            pad_id = stored_pad_id(dataset)
            if pad_id is None:
                raise ValueError(f"SFTCollator: {_dataset_dir(dataset)} records no pad token (not written by gload "
                                 "tokenize): give pad_id")
        if isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0:
            raise ValueError(f"SFTCollator: pad_id {pad_id!r}: want a token id")
        if isinstance(pad_multiple, bool) or not isinstance(pad_multiple, int) or pad_multiple < 1:
            raise ValueError(f"SFTCollator: pad_multiple {pad_multiple!r}: want an integer >= 1")
        if return_tensors not in ("pt", "np"):
            raise ValueError(f"SFTCollator: return_tensors {return_tensors!r}: want 'pt' or 'np'")
        self.pad_id, self.pad_multiple, self.ignore_index = pad_id, pad_multiple, int(ignore_index)
        self.return_tensors = return_tensors

    def __call__(self, features: List[Any]) -> Dict[str, Any]:
        import numpy as np

        if not features:
            raise ValueError("SFTCollator: an empty batch")
        rows = []
        for i, f in enumerate(features):
            ids = f.get("input_ids") if hasattr(f, "get") else None
            if ids is None:
                raise ValueError(f"SFTCollator: row {i} of the batch has no input_ids (columns: {sorted(f)})")
            ids = np.asarray(ids)
            labels = f.get("labels")
            labels = ids if labels is None else np.asarray(labels)
            if ids.ndim != 1 or labels.ndim != 1 or len(ids) != len(labels):
                raise ValueError(f"SFTCollator: row {i}: input_ids {ids.shape} and labels {labels.shape} must be "
                                 "token lists of one length")
            if len(ids) > _MAX_ROW_TOKENS:
                raise ValueError(f"SFTCollator: row {i} has {len(ids)} tokens (more than {_MAX_ROW_TOKENS})")
            rows.append((ids, labels))
        longest = max(len(ids) for ids, _ in rows)
        length = -(-longest // self.pad_multiple) * self.pad_multiple
        if length * len(rows) > _MAX_BATCH_TOKENS:
            raise ValueError(f"SFTCollator: {len(rows)} rows of {length} tokens is more than {_MAX_BATCH_TOKENS}")
        input_ids = np.full((len(rows), length), self.pad_id, np.int64)
        labels = np.full((len(rows), length), self.ignore_index, np.int64)
        mask = np.zeros((len(rows), length), np.int64)
        for r, (ids, lab) in enumerate(rows):
            n = len(ids)
            input_ids[r, :n] = ids
            labels[r, :n] = lab
            mask[r, :n] = 1
        out = {"input_ids": input_ids, "attention_mask": mask, "labels": labels}
        if self.return_tensors == "pt":
            import torch

            out = {k: torch.from_numpy(v) for k, v in out.items()}
        return out


def save_state(loader: Loader, checkpoint_dir: str) -> str:
    """Writes ``loader.state_dict()`` as ``checkpoint_dir/gload_state.json`` (through a temporary file and a rename,
    so a crash never leaves half a state) and returns the path."""
    path = os.path.join(checkpoint_dir, STATE_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(loader.state_dict(), f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_state(loader: Loader, checkpoint_dir: str) -> bool:
    """Loads ``checkpoint_dir/gload_state.json`` into ``loader``; False when the checkpoint has none (a checkpoint
    written without gload: the epoch then starts from its beginning)."""
    path = os.path.join(checkpoint_dir, STATE_FILE)
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        loader.load_state_dict(json.load(f))
    return True


def _world_size(args: Any) -> int:
    return int(getattr(args, "world_size", 1) or 1)


def check_args(loader: Loader, args: Any) -> Dict[str, Any]:
    """Reconciles a Loader with ``TrainingArguments``: returns the Loader settings to take from ``args`` (for those
    the Loader was not given) and raises ``ValueError`` listing every setting that cannot be honoured or that both
    set differently, each with what to do."""
    problems: List[str] = []
    take: Dict[str, Any] = {}
    given = getattr(loader, "_given", set())
    pol = loader._policy
    policy = pol.policy or "bucketed"

    if getattr(args, "group_by_length", False):
        problems.append("group_by_length=True: gload already groups by length (policy='bucketed', Hugging Face's "
                        "LengthGroupedSampler semantics, planned by the server); set group_by_length=False")
    if int(getattr(args, "dataloader_num_workers", 0) or 0) > 0:
        problems.append(f"dataloader_num_workers={args.dataloader_num_workers}: GloadTrainer iterates the Loader in "
                        "the main process (the server prefetches; workers would hide which batch was trained on); "
                        "set dataloader_num_workers=0")

    bs = int(args.per_device_train_batch_size)
    if policy == "tokens":
        if "batch_size" in given and pol.batch_size and pol.batch_size != bs:
            problems.append(f"per_device_train_batch_size={bs} but Loader(policy='tokens', batch_size="
                            f"{pol.batch_size}) caps rows per batch: make them equal, or leave batch_size unset")
    elif "batch_size" in given:
        if pol.batch_size != bs:
            problems.append(f"per_device_train_batch_size={bs} but Loader(batch_size={pol.batch_size}): make them "
                            "equal (or leave the Loader's batch_size unset to take the Trainer's)")
    else:
        take["batch_size"] = bs

    seed = args.data_seed if getattr(args, "data_seed", None) is not None else args.seed
    if "seed" in given:
        if loader.seed != int(seed):
            which = "data_seed" if getattr(args, "data_seed", None) is not None else "seed"
            problems.append(f"TrainingArguments.{which}={seed} but Loader(seed={loader.seed}): the data order follows "
                            f"the Loader's seed; make them equal (or leave the Loader's seed unset)")
    else:
        take["seed"] = int(seed)

    drop = bool(getattr(args, "dataloader_drop_last", False))
    want = "drop" if drop else "wrap"
    if "remainder" in given:
        r = pol.remainder
        if (drop and r != "drop") or (not drop and r != "wrap" and _world_size(args) > 1):
            problems.append(f"dataloader_drop_last={drop} but Loader(remainder={r!r}): batches that do not divide "
                            f"among ranks are {'dropped' if drop else 'repeated'} with remainder={want!r}; make "
                            "them agree (or leave the Loader's remainder unset)")
    else:
        take["remainder"] = want
    if problems:
        raise ValueError("GloadTrainer: TrainingArguments and the gload.Loader disagree:\n  - " + "\n  - ".join(problems))
    return take


def _configure(loader: Loader, take: Dict[str, Any]) -> None:
    """Applies settings taken from TrainingArguments to a Loader that has not streamed yet."""
    if not take:
        return
    if loader._opened is not None or loader._pending is not None:
        raise ValueError("GloadTrainer: the Loader has already streamed or loaded a state; pass it to GloadTrainer "
                         "before iterating it, or give it batch_size, seed and remainder explicitly")
    loader._close_stream()
    if "batch_size" in take:
        loader._policy.batch_size = int(take["batch_size"])
    if "seed" in take:
        loader.seed = int(take["seed"])
    if "remainder" in take:
        loader._policy.remainder = take["remainder"]


_cls: Optional[type] = None


def _build() -> type:
    """Defines GloadTrainer against the installed transformers (imported here, not at import gload.hf)."""
    import torch.utils.data
    import transformers
    from transformers.trainer_utils import get_last_checkpoint

    class _Feed(torch.utils.data.DataLoader):
        """The Loader as the Trainer's train dataloader: no batching (the server batched), no accelerate wrapper (no
        read-ahead), ``set_epoch`` forwarded, ``len`` the whole epoch (the Trainer's epoch arithmetic assumes it)."""

        def __init__(self, loader: Loader, pin_memory: bool) -> None:
            # A generator of its own: torch's DataLoader otherwise draws a seed from torch's global RNG for every
            # iterator it makes, and on a resume the Trainer restores the checkpoint's RNG *before* it makes the
            # iterator (ignore_data_skip), so dropout after the resume would differ from the uninterrupted run's.
            super().__init__(loader, batch_size=None, num_workers=0, pin_memory=pin_memory,
                             generator=torch.Generator())
            self.loader = loader

        def set_epoch(self, epoch: int) -> None:
            self.loader.set_epoch(int(epoch))

        def __len__(self) -> int:
            return self.loader.epoch_batches()

    class _SaveState(transformers.TrainerCallback):
        def __init__(self, trainer: "GloadTrainer") -> None:
            self.trainer = trainer

        def on_save(self, args, state, control, **kw):  # noqa: ANN001 - transformers' signature
            ckpt = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            if state.is_world_process_zero and os.path.isdir(ckpt):
                save_state(self.trainer.gload_loader, ckpt)
            return control

    class _EpochFraction(transformers.TrainerCallback):
        """After a resume the Trainer counts the resumed epoch's steps from 0 (the loader skips what was trained, not
        the Trainer: ignore_data_skip), so its ``state.epoch`` would restart at the epoch's start; this adds the
        batches the loaded state had consumed, so logs and checkpoints say the uninterrupted run's epoch."""

        def __init__(self, trainer: "GloadTrainer") -> None:
            self.trainer = trainer

        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001 - transformers' signature
            epoch, skipped, n = self.trainer._gload_skipped
            if skipped and n and state.epoch is not None and int(state.epoch) == epoch:
                steps = round((state.epoch - epoch) * n)  # the Trainer's step + 1 in this epoch
                state.epoch = epoch + (steps + skipped) / n  # as the Trainer computes it without a resume
            return control

    class GloadTrainer(transformers.Trainer):
        """``transformers.Trainer`` whose ``train_dataset`` is a :class:`gload.Loader` (see :mod:`gload.hf`).
        Every other argument is Trainer's."""

        def __init__(self, *args: Any, train_dataset: Any = None, **kwargs: Any) -> None:
            if not isinstance(train_dataset, Loader):
                raise TypeError(f"GloadTrainer: train_dataset must be a gload.Loader, got "
                                f"{type(train_dataset).__name__}; for other datasets use transformers.Trainer")
            targs = kwargs.get("args", args[1] if len(args) > 1 else None)
            take = None if targs is None else check_args(train_dataset, targs)  # before Trainer's own checks
            if targs is not None:
                # The loader resumes itself: the Trainer must not replay the epoch to skip the batches trained on.
                # Set on a copy: the caller's TrainingArguments stay as they were given.
                targs = copy.copy(targs)
                targs.ignore_data_skip = True
                if "args" in kwargs or len(args) <= 1:
                    kwargs["args"] = targs
                else:
                    args = args[:1] + (targs,) + args[2:]
            super().__init__(*args, train_dataset=train_dataset, **kwargs)
            self.gload_loader = train_dataset
            _configure(train_dataset, check_args(train_dataset, self.args) if take is None else take)
            self.args.ignore_data_skip = True  # (the Trainer's own default arguments when none were given)
            self.add_callback(_SaveState(self))
            self._gload_skipped = (0, 0, 0)  # (epoch, batches of it a loaded state had consumed, its batches)
            self.add_callback(_EpochFraction(self))

        def get_train_dataloader(self) -> torch.utils.data.DataLoader:
            return _Feed(self.gload_loader, pin_memory=bool(self.args.dataloader_pin_memory))

        def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
            ckpt = resume_from_checkpoint
            if ckpt is True:
                ckpt = get_last_checkpoint(self.args.output_dir)
                if ckpt is None:
                    raise ValueError(f"GloadTrainer: resume_from_checkpoint=True but {self.args.output_dir} holds "
                                     "no checkpoint")
            if isinstance(ckpt, str):
                load_state(self.gload_loader, ckpt)
                ld = self.gload_loader
                n = ld.epoch_batches()
                self._gload_skipped = (ld.epoch, n - len(ld), n)
            return super().train(ckpt, *args, **kwargs)

    return GloadTrainer


def __getattr__(name: str) -> Any:
    global _cls
    if name == "GloadTrainer":
        if _cls is None:
            _cls = _build()
        return _cls
    raise AttributeError(f"module 'gload.hf' has no attribute {name!r}")
