"""What a :class:`gload.Loader` reads off Hugging Face accelerate's prepared DataLoader, so that
``accelerator.prepare(DataLoader(loader, batch_size=None))`` trains and resumes exactly. Nothing here imports
accelerate.

accelerate (0.30 to 1.x) wraps a prepared DataLoader in a ``DataLoaderShard`` (``DataLoaderDispatcher`` when it
dispatches batches from process 0, its default for an IterableDataset), which:

- calls ``dataset.set_epoch(self.iteration)`` at the start of each of its iterations, with its own count of the
  iterations *that wrapper object* ran: 0 in a process that has just resumed, and 0 for the new wrapper that
  ``skip_first_batches`` makes;
- reads one batch ahead of what it yields (to know which batch is the last one);
- skips ``skip_batches`` batches by reading them and dropping them (``skip_first_batches(dl, n)`` makes a new wrapper
  with ``skip_batches = n``);
- reports ``len(dataset)`` as its length, which scripts such as transformers' ``run_clm_no_trainer.py`` use after
  ``load_state`` to turn a checkpoint's step into an epoch and a number of batches to skip.

So the Loader, when such a wrapper (its ``dataset`` is this Loader, its class is accelerate's) calls it:

- ``set_epoch`` from the wrapper's ``__iter__`` means "a new iteration starts": the epoch is the loaded state's (a
  state at the end of its epoch: the next one), else the one after the previous wrapper iteration's (or the
  wrapper's count, if higher), else the next one after a finished epoch. An explicit ``set_epoch`` (the Loader's, or
  the wrapper's called by the script) wins. The wrapper's ``iteration`` is set to that epoch;
- ``skip_batches`` of the wrapper is taken as a position, not as batches to read: with a loaded state the Loader
  already stands there (the skip is a no-op; a different count is logged), without one it opens the epoch after
  that many batches (the server skips them, nothing is sent); the wrapper's ``skip_batches`` is then set to 0;
- ``state_dict()`` leaves out the one batch the wrapper has read ahead (the batch the script trains on is the one
  before), until the epoch's end;
- ``len()`` is the whole epoch, even after a loaded state.

The same holds without the wrapper where accelerate is seen: ``skip_first_batches`` of a DataLoader that is not
accelerate's (the Hugging Face Trainer's own, say) gives a ``SkipDataLoader``, whose skip the Loader takes as a
position when that iterates it; and after a state loaded by accelerate's ``load_state`` (``register_for_checkpointing``)
``len(loader)`` is the whole epoch, for scripts that pass the Loader itself to ``prepare`` (which returns it as it is).

Refused with a message saying what to do: accelerate's re-sharding across processes (``IterableDatasetShard``, or
dispatching from process 0 with several processes): gload already gives every rank its own batches.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from .errors import InvalidArgument

log = logging.getLogger("gload")

_MULTI = ("accelerate re-shards a prepared DataLoader's batches across its {n} processes, but gload already gives "
          "every rank its own batches (by torch.distributed's rank): do not pass the DataLoader over a gload.Loader "
          "to accelerator.prepare in a multi-process run; iterate the Loader itself (or DataLoader(loader, "
          "batch_size=None) unprepared) and move batches to accelerator.device")


def _is_accelerate(obj: Any) -> bool:
    return type(obj).__module__.startswith("accelerate.")


def wrapper_of(loader: Any, frame: Any, depth: int = 1) -> Optional[Any]:
    """The accelerate object over ``loader`` (its ``dataset`` is the loader) among the ``self`` of ``frame`` and
    the ``depth - 1`` frames above it; None if there is none."""
    for _ in range(depth):
        if frame is None:
            return None
        # Only accelerate's and torch's frames are looked into (accelerate's wrappers inherit torch DataLoader's
        # methods): reading f_locals of another frame (the user's loop) makes Python keep a snapshot of its locals,
        # which would keep a dropped Loader alive (issue 34 item 13).
        if _in_module(frame, ("accelerate.", "torch.")):
            obj = frame.f_locals.get("self")
            if obj is not None and obj is not loader and _is_accelerate(obj) and getattr(obj, "dataset", None) is loader:
                return obj
        frame = frame.f_back
    return None


def _in_module(frame: Any, prefix: Any) -> bool:
    """Whether ``frame`` runs code of a module whose name starts with ``prefix`` (a string or a tuple of them; read
    off its globals: no locals snapshot is made)."""
    return str(frame.f_globals.get("__name__", "")).startswith(prefix)


def _processes(w: Any) -> int:
    state = getattr(w, "state", None)
    n = getattr(state, "num_processes", None)
    if n is None:
        try:
            from accelerate.state import PartialState  # type: ignore[import-not-found]

            n = PartialState().num_processes
        except Exception:  # noqa: BLE001 - no accelerate state: one process
            n = 1
    return int(n or 1)


def wrapper_set_epoch(loader: Any, frame: Any, epoch: int) -> bool:
    """Handles ``loader.set_epoch(epoch)`` called by accelerate's wrapper at the start of its iteration (``frame``
    is set_epoch's caller): picks the epoch and position as the module says and returns True; False when the call
    is not the wrapper's own (the script's set_epoch, through the wrapper or not: authoritative)."""
    w = wrapper_of(loader, frame)
    if w is None:
        return False
    if type(w).__name__ == "IterableDatasetShard" or (type(w).__name__ == "DataLoaderDispatcher" and _processes(w) > 1):
        raise InvalidArgument(_MULTI.format(n=_processes(w)))
    up = frame.f_back
    if up is None or up.f_code.co_name != "__iter__" or not _in_module(up, "accelerate.") or up.f_locals.get("self") is not w:
        return False
    _start_iteration(loader, w, int(epoch))
    return True


def iteration_skip(loader: Any, frame: Any) -> None:
    """At ``loader.__iter__`` (``frame``: its caller): an accelerate ``SkipDataLoader`` (what ``skip_first_batches``
    makes of a DataLoader that is not accelerate's own, e.g. the Hugging Face Trainer's, or of an unprepared one)
    over this loader, found among the callers, has its skip taken as a position, as the wrapper's is."""
    w = wrapper_of(loader, frame, depth=12)
    if w is not None and int(getattr(w, "skip_batches", 0) or 0) > 0:
        _absorb_skip(loader, w, loader.epoch)


def loaded_by_accelerate(frame: Any, depth: int = 3) -> bool:
    """Whether ``load_state_dict`` was called by accelerate's ``load_state`` (``frame``: its caller; accelerate's
    ``load_custom_state`` lives in ``accelerate.checkpointing``)."""
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == "accelerate.checkpointing":
            return True
        frame = frame.f_back
    return False


def _absorb_skip(loader: Any, w: Any, epoch: int) -> None:
    skip = int(getattr(w, "skip_batches", 0) or 0)
    if skip <= 0:
        return
    if loader._pending is not None and int(loader._pending["epoch"]) == epoch:
        want = skip * loader._rank_world()[1]  # global batches from the epoch's start
        if want != int(loader._pending["consumed"]):
            log.warning("gload: skip_first_batches(%d) asks for global position %d of epoch %d, the loaded state "
                        "stands at %d: continuing from the loaded state", skip, want, epoch,
                        loader._pending["consumed"])
    else:
        loader._pending = loader._state_after(skip)
    w.skip_batches = 0


def _start_iteration(loader: Any, w: Any, count: int) -> None:
    pending = loader._pending
    if loader._epoch_pinned:
        e = loader.epoch
    elif loader._wrapper_epoch is None:
        if pending is not None:
            e = int(pending["epoch"])
            if loader._left_after_pending() == 0:  # saved after its epoch's last batch: the next epoch starts
                e += 1
        else:
            e = max(count, loader.epoch + (1 if loader._finished else 0))
    else:
        e = max(count, loader._wrapper_epoch + 1)
    loader._pick_epoch(e)
    loader._epoch_pinned = False
    loader._wrapper_epoch = e
    if hasattr(w, "iteration"):
        w.iteration = e
    _absorb_skip(loader, w, e)
    loader._wrapper_ready = True
