"""One rank of the CPU DDP test (run by torchrun from test_ddp.py).

usage: ddp_worker.py ADDR DATASET OUT_JSON TRANSPORT [--stop-after K] [--resume STATE_JSON] [--workers N]

ADDR "-" makes DATASET a dataset directory: the Loader finds or starts the job's server (every rank of the job shares
one). --workers N feeds the loop through a torch DataLoader with N worker processes (fork), each a copy of the
rank's Loader taking its share of the rank's batches.

Each rank trains a tiny DDP model (gloo backend) on batches from its own gload.Loader, which takes rank and world size
from torch.distributed. Unequal step counts would hang DDP's collective ops; the rows and steps of every rank are
gathered to rank 0, which writes them (with the loader state after the last step) to OUT_JSON.
"""
import argparse
import faulthandler
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gload  # noqa: E402

VOCAB = 4096  # examples/udhr/tokenizer.json


def main() -> None:
    faulthandler.dump_traceback_later(float(os.environ.get("GLOAD_DDP_DUMP_AFTER", "75")), exit=True)
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("dataset")
    p.add_argument("out")
    p.add_argument("transport")
    p.add_argument("--stop-after", type=int, default=0)
    p.add_argument("--resume")
    p.add_argument("--workers", type=int, default=0)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.EmbeddingBag(VOCAB, 8, mode="mean"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    source = (a.dataset,) if a.addr == "-" else (a.addr, a.dataset)
    loader = gload.Loader(*source, batch_size=4, seed=3, transport=a.transport, client_id=f"ddp{rank}", keys="all")
    if a.resume:
        with open(a.resume) as f:
            loader.load_state_dict(json.load(f))
    batches = loader
    if a.workers:
        batches = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=a.workers,
                                              multiprocessing_context="fork")
    rows, steps, state = [], 0, None
    for batch in batches:
        loss = model(batch["input_ids"].long()).pow(2).mean()
        loss.backward()  # all-reduce across ranks: hangs if a rank runs out of batches early
        opt.step()
        opt.zero_grad()
        rows += [int(i) for i in batch["index"]]
        steps += 1
        if a.stop_after and steps == a.stop_after:
            # Through workers the main process's Loader did not read the batches: the state of the first `steps`
            # batches of this rank's epoch (from where it resumed).
            state = loader.state_dict(batches=steps) if a.workers else loader.state_dict()
            break
    if state is None:
        state = loader.state_dict(batches=steps) if a.workers else loader.state_dict()
    loader.close()
    del model, opt  # torch 1.13's DDP hangs at exit when its reducer outlives the process group
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "rows": rows, "steps": steps, "state": state, "addr": loader.addr})
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"world": world, "ranks": gathered}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
