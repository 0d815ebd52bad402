"""torchdata's StatefulDataLoader over a :class:`gload.Loader`, resumed with any ``num_workers``.

``StatefulDataLoader(loader, batch_size=None, num_workers=N)`` stores ``loader.state_dict()`` of each worker (after
the last batch of that worker the main process handed out), and resumes exactly with the *same* ``num_workers``
through its own ``load_state_dict``. With another worker count torchdata refuses (an ``AssertionError`` on
``num_workers``); turn its state into a Loader state instead and start a fresh StatefulDataLoader:

    from gload.torchdata import loader_state
    loader.load_state_dict(loader_state(saved))                  # saved = old_dataloader.state_dict()
    dl = StatefulDataLoader(loader, batch_size=None, num_workers=3)  # any count; len(dl) is what is left

It works because gload's resume state is global: a rank's batches are dealt to its workers round-robin in plan order,
so the worker state that has consumed the most (of the newest epoch) is the position after the last batch the main
process handed out. Nothing here imports torchdata.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

__all__ = ["loader_state", "worker_states"]


def pending_state(loader: Any, frame: Any, depth: int = 3) -> Optional[Dict[str, Any]]:
    """The Loader state a torchdata StatefulDataLoader over ``loader`` (``self`` of ``frame`` or of the frames above
    it, up to ``depth``) holds from its own ``load_state_dict`` and has not started from yet; None if there is none.
    It lets ``len(dl)`` after ``dl.load_state_dict(saved)`` be what is left, as after ``loader.load_state_dict``."""
    for _ in range(depth):
        if frame is None:
            return None
        # Only torchdata's and torch's frames are looked into (StatefulDataLoader inherits __len__ from torch's
        # DataLoader); a locals snapshot of the user's frame would keep a dropped Loader alive.
        mod = str(frame.f_globals.get("__name__", ""))
        obj = frame.f_locals.get("self") if mod.startswith(("torchdata.", "torch.")) else None
        if (obj is not None and obj is not loader and type(obj).__module__.startswith("torchdata.")
                and getattr(obj, "dataset", None) is loader):
            pending = getattr(obj, "next_iter_state", None)
            if not pending:
                return None
            try:
                return loader_state(pending)
            except ValueError:  # saved before any batch was handed out: the whole epoch is left
                return None
        frame = frame.f_back
    return None

_MARK = ("fingerprint", "policy_hash", "consumed", "epoch", "seed")


def worker_states(state: Any) -> List[Dict[str, Any]]:
    """Every gload Loader state inside ``state`` (a StatefulDataLoader state, or anything holding Loader states)."""
    return list(_walk(state))


def _walk(x: Any) -> Iterator[Dict[str, Any]]:
    if isinstance(x, dict):
        if all(k in x for k in _MARK):
            yield x
            return
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _walk(v)


def loader_state(state: Any) -> Dict[str, Any]:
    """The Loader state a StatefulDataLoader state stands for: the worker state furthest into the plan (newest epoch,
    then most consumed), reduced to its global part, so that it resumes with any worker count or world size. Raises
    ``ValueError`` when ``state`` holds no Loader state (the dataloader was not over a gload.Loader, or it had not
    handed out a batch yet: then start from the beginning) or states of different datasets, seeds or policies."""
    found = worker_states(state)
    if not found:
        raise ValueError("loader_state: no gload Loader state in this state dict (was the StatefulDataLoader over a "
                         "gload.Loader, and had it handed out a batch?)")
    ids = {(s["fingerprint"], int(s["seed"]), s["policy_hash"]) for s in found}
    if len(ids) > 1:
        raise ValueError(f"loader_state: states of different datasets, seeds or policies: {sorted(ids)}")
    best = max(found, key=lambda s: (int(s["epoch"]), int(s["consumed"])))
    return {k: best[k] for k in ("version", "fingerprint", "seed", "epoch", "policy_hash", "consumed", "plan_world")
            if k in best}
