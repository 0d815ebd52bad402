#!/usr/bin/env python3
"""Feeds for the reference training workload: ``train_ref.py --modes feed --feed train_feed:FUNCTION``.

train_ref.py (../shared/bench/train_ref.py) calls ``FUNCTION(args)`` with its parsed arguments and iterates what it
returns. Each feed here iterates forever (epoch after epoch), so train_ref never needs to restart it.

- ``feed``: batches from a gload server through the Python client (``gload.Loader``).
- ``naive_reported`` and ``workers_reported``: the DataLoaders train_ref builds for its ``naive`` and ``workers``
  modes (tokenizing in the loop; 0 or 8 workers), unchanged, but every ``next()`` wait and every step time is sent to
  the gload server's Report RPC (client ids "naive" and "workers"), so that gload's GPU watch judges those loops too.

Environment: GLOAD_ADDR (default unix:///tmp/gload.sock), GLOAD_DATASET (default "corpus"), GLOAD_TRANSPORT (shm or
grpc, default shm), GLOAD_AUTO_BUCKETS (K > 0: K padded lengths chosen from the dataset instead of multiples of
--pad-multiple; default 0), GLOAD_PREFETCH (default 8). Needs ``PYTHONPATH`` to hold pyclient/ (the gload package).
"""

import atexit
import os
import sys
import time


def _addr():
    return os.environ.get("GLOAD_ADDR", "unix:///tmp/gload.sock")


def _forever(loader):
    """Yields the loader's batches epoch after epoch, as train_ref wants them: input_ids and attention_mask."""
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        n = 0
        for b in loader:
            n += 1
            yield {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
        if n == 0:
            raise RuntimeError(f"gload: epoch {epoch} of {loader.dataset} at {loader.addr} gave this loader no batch")
        epoch += 1


def feed(args):
    """Batches of the pre-tokenized dataset from gload, on the GPU (device="cuda"), padded to multiples of
    --pad-multiple (or to GLOAD_AUTO_BUCKETS automatic lengths), rows cut at --seq tokens."""
    from gload import Loader

    loader = Loader(
        _addr(),
        os.environ.get("GLOAD_DATASET", "corpus"),
        batch_size=args.batch_size,
        pad_multiple=args.pad_multiple,
        max_length=args.seq,
        auto_buckets=int(os.environ.get("GLOAD_AUTO_BUCKETS", "0")),
        transport=os.environ.get("GLOAD_TRANSPORT", "shm"),
        prefetch=int(os.environ.get("GLOAD_PREFETCH", "8")),
        device="cuda",
        labels=False,
        keys=("input_ids", "attention_mask"),
        client_id="feed",
    )
    atexit.register(loader.close)
    return _forever(loader)


def _reported(batches, client_id):
    """Iterates the DataLoader `batches` forever, sending each next() wait and the step time before it to the
    server as `client_id`. The reporter (a gRPC channel) is made after the DataLoader's workers have forked."""
    from gload.watch import StepReporter

    it = iter(batches)
    reporter = StepReporter(_addr(), client_id)
    atexit.register(reporter.close)
    returned = None  # when the previous batch was handed to the loop
    seq = 0
    while True:
        asked = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:  # a new epoch: re-iterating is part of the wait
            it = iter(batches)
            b = next(it)
        got = time.perf_counter()
        reporter.report(got - asked, 0.0 if returned is None else asked - returned, seq)
        seq += 1
        returned = time.perf_counter()
        yield b


def _dataloader(args, **kw):
    """train_ref's tokenize-in-the-loop DataLoader (its Texts and collate_tokenize, from __main__)."""
    from torch.utils.data import DataLoader

    main = sys.modules["__main__"]
    return DataLoader(main.Texts(), batch_size=args.batch_size, shuffle=True, collate_fn=main.collate_tokenize, **kw)


def naive_reported(args):
    """train_ref's ``naive`` mode (tokenize in collate_fn, no workers, no pinning), reported as client "naive"."""
    return _reported(_dataloader(args), "naive")


def workers_reported(args):
    """train_ref's ``workers`` mode (8 workers, pinned, persistent, prefetch 4), reported as client "workers"."""
    dl = _dataloader(args, num_workers=8, pin_memory=True, persistent_workers=True, prefetch_factor=4)
    return _reported(dl, "workers")
