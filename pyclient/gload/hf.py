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
  ``train(resume_from_checkpoint=...)`` loads it, and sets ``ignore_data_skip`` so the Trainer does not replay the
  epoch to skip batches: the batches after the resume are those an uninterrupted run trains on next.
- The epoch the Trainer is in goes to ``loader.set_epoch``.

``import gload.hf`` is light: transformers is imported when ``GloadTrainer`` is first used.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from .loader import Loader

STATE_FILE = "gload_state.json"

__all__ = ["GloadTrainer", "STATE_FILE", "check_args", "load_state", "save_state"]


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
            super().__init__(loader, batch_size=None, num_workers=0, pin_memory=pin_memory)
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

    class GloadTrainer(transformers.Trainer):
        """``transformers.Trainer`` whose ``train_dataset`` is a :class:`gload.Loader` (see :mod:`gload.hf`).
        Every other argument is Trainer's."""

        def __init__(self, *args: Any, train_dataset: Any = None, **kwargs: Any) -> None:
            if not isinstance(train_dataset, Loader):
                raise TypeError(f"GloadTrainer: train_dataset must be a gload.Loader, got "
                                f"{type(train_dataset).__name__}; for other datasets use transformers.Trainer")
            targs = kwargs.get("args", args[1] if len(args) > 1 else None)
            take = None if targs is None else check_args(train_dataset, targs)  # before Trainer's own checks
            super().__init__(*args, train_dataset=train_dataset, **kwargs)
            self.gload_loader = train_dataset
            _configure(train_dataset, check_args(train_dataset, self.args) if take is None else take)
            # The loader resumes itself: the Trainer must not replay the epoch to skip the batches trained on.
            self.args.ignore_data_skip = True
            self.add_callback(_SaveState(self))

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
            return super().train(ckpt, *args, **kwargs)

    return GloadTrainer


def __getattr__(name: str) -> Any:
    global _cls
    if name == "GloadTrainer":
        if _cls is None:
            _cls = _build()
        return _cls
    raise AttributeError(f"module 'gload.hf' has no attribute {name!r}")
