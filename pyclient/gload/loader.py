"""gload.Loader: one training process's (or DataLoader worker's) view of a gload server's batches."""

from __future__ import annotations

import atexit
import gc
import logging
import math
import os
import queue
import threading
import socket
import sys
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from . import _autostart
from ._channel import auth_token as _auth_token
from ._channel import grpc_fork_safe, open_channel, open_checked_channel, resolve  # noqa: F401 - grpc_fork_safe for users and tests
from ._peercred import UNKNOWN, check_server
from ._channel import read_token_file
from . import _accelerate, _keys
from . import torchdata as _torchdata
from ._convert import Converter
from ._proto import gload_pb2 as pb
from ._proto import gload_pb2_grpc as pb_grpc
from ._ring import Ring
from ._stats import Stats
from ._stream import Stream
from .errors import GloadError, InvalidArgument, ServerUnavailable, translate

try:  # torch is optional: without it batches are numpy arrays and Loader is a plain iterable.
    if os.environ.get("GLOAD_NO_TORCH"):
        raise ImportError("GLOAD_NO_TORCH is set")
    import torch
    import torch.utils.data

    _Base: Any = torch.utils.data.IterableDataset
except ImportError:  # pragma: no cover - exercised by the numpy-only CI venv
    torch = None
    _Base = object

log = logging.getLogger("gload")

_UNSET: Any = object()
_STATE_KEYS = ("fingerprint", "seed", "epoch", "policy_hash", "consumed", "plan_world")
_STATE_VERSION = 1
# Generous bound on the server's answer to open (it may plan a large epoch first).
_OPEN_TIMEOUT_S = 120.0
_MAX_MESSAGE_BYTES = 1 << 30

Address = str
State = Dict[str, Any]


def _seconds(t: Any, what: str, none_ok: bool = True) -> Optional[float]:
    """Checks a time in seconds: None (when ``none_ok``) or a number >= 0; infinity means no bound (None). NaN,
    negative numbers and non-numbers raise ValueError."""
    if t is None and none_ok:
        return None
    if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what}: want seconds (a number >= 0{' or None' if none_ok else ''}), got {t!r}")
    t = float(t)
    if math.isnan(t) or t < 0:
        raise ValueError(f"{what}: want seconds >= 0{' or None' if none_ok else ''}, got {t!r}")
    if t > threading.TIMEOUT_MAX:  # infinity (or beyond what a lock can wait): no bound
        return None
    return t


def _patience(t: Any, what: str) -> float:
    """A number of seconds to keep trying (>= 0; infinity: for ever)."""
    s = _seconds(t, what, none_ok=False)
    return math.inf if s is None else s


def _rpc_timeout(t: Optional[float]) -> Optional[float]:
    """A patience as a gRPC deadline (None: none)."""
    return None if t is None or math.isinf(t) else t


class Loader(_Base):
    """Batches of a dataset served by ``gload serve``, for one training process (or one DataLoader worker).

    Iterating yields one epoch of this consumer's batches as dicts holding ``keys``. By default these are what a
    transformers causal LM's ``forward`` takes: ``input_ids`` [B, L] (padded with ``pad_id``), ``attention_mask``
    [B, L] (1 on real tokens), ``labels`` [B, L] (``input_ids`` with padding set to ``ignore_index``, default -100;
    for packed batches the first token of every document too; ``labels="shifted"`` gives next-token targets,
    ``labels[:, t] = input_ids[:, t+1]``, for loops that do not shift, with nanoGPT's ``ignore_index=-1`` if
    wanted), and for packed batches ``position_ids`` [B, L]. On request (``keys=[...]``, or ``keys="all"``):
    ``index`` [pieces] int64 (the dataset row of each sequence or packed piece), ``lengths`` [B] int32 (real tokens
    per row) and for packed batches ``cu_seqlens`` [n+1] int32 (segment boundaries over the flattened batch; each
    row's padding tail is a segment of its own). An unknown key raises, naming the valid ones.

    Mixtures: ``dataset`` may name a mixture the server was started with (``gload serve --mixture``) or be a mapping
    of dataset names to weights (``{"web": 0.6, "code": 0.3, "math": 0.1}``; weights are normalised, 0 leaves a
    source out). ``mix_by`` "samples" (weights are shares of rows) or "tokens"; ``epoch_until`` (a source: the epoch
    ends when it has been seen once), ``epoch_samples`` / ``epoch_tokens`` set the mixture epoch's length;
    ``allow_tokenizer_mismatch`` mixes datasets of different tokenizers; ``single_source_batches`` (bucketed, tokens)
    makes every batch hold rows of one source. Batches then carry ``source`` [pieces] int64
    (the source's position in the mixture) and ``index`` is the row within that source; :meth:`source_counts` and
    :meth:`report` tell the rows and tokens handed out per source.

    ``pad_id`` None pads with the pad token the dataset recorded when it was tokenized (the tokenizer's pad token,
    else its eos token; 0 for datasets that recorded none, such as those Hugging Face wrote); an id overrides it.

    With torch importable the values are torch tensors on ``device`` (None: CPU), else numpy arrays;
    ``return_tensors`` ("pt" or "np") forces one or the other. ``dtype`` is int64 for input_ids, attention_mask,
    labels and position_ids by default (what transformers' models and ``cross_entropy`` expect), one int32/int64
    dtype for all four, or a dict per key (``{"input_ids": torch.int32, "labels": torch.int64}``). Every tensor
    handed out is the caller's: writable, and never touched by the client again — except with
    ``static_buffers=True`` (``device="cuda"`` only, for CUDA graphs): then every batch of one shape comes in the
    same device tensors, overwritten by the next batch of that shape on the stream that was current at the
    ``next()`` call (so after the work queued on it before), and a tensor whose size depends on the content
    (``index``, and ``cu_seqlens`` of packed batches) is replaced when its size changes. Capture graphs with
    ``torch.cuda.graph(g, capture_error_mode="thread_local")``: the client's reader thread keeps copying batches
    (and waiting for its copies) during a capture, which the default global mode refuses. Or with
    ``zero_copy=True`` (numpy over ``transport="shm"``, outside DataLoader workers): the keys the ring's slot holds
    in the dtype handed out (``input_ids``, ``lengths``, ``index``, ``position_ids``, ``cu_seqlens``, and an SFT
    dataset's ``labels`` when int32 is asked for them) are read-only views of the slot, valid until the next
    ``next()`` call, which gives the slot back to the server to refill: copy what you keep longer. ``input_ids``
    and ``position_ids`` are int32 then (as the ring holds them; a ``dtype`` asking int64 is refused);
    ``attention_mask`` and computed ``labels`` are still made per batch. A stream without the doorbell hand-off
    (an older server) gives copies.

    ``eval=True`` (or ``shuffle=False, remainder="keep"``) is an evaluation pass: rows in dataset order, cut into
    consecutive batches each padded to its own longest row, no warm-up, the last partial batch kept and every row
    exactly once, still sharded across ranks (global batch g to rank g mod world_size) — so ranks may get one batch
    more than others: do not run a collective per batch over such a pass (gather at the end instead).

    One ``for`` loop is one epoch (``epoch``, or the one :meth:`set_epoch` picked; without set_epoch a loop after one
    that ran its epoch to the end runs the next epoch). ``rank``/``world_size`` default
    to torch.distributed's when it is initialised (else 0/1), ``worker``/``num_workers`` to the DataLoader worker's
    (``torch.utils.data.get_worker_info()``; else 0/1); explicit arguments win. Global batch g of the epoch plan goes
    to rank g mod world_size, and a rank's batches to its workers round-robin, so ``DataLoader(loader,
    batch_size=None, num_workers=N)`` yields the rank's batches in plan order.

    Batch policy (see DESIGN.md, Batches): ``policy`` "bucketed" (``batch_size`` rows of similar length), "tokens"
    (rows × padded length ≤ ``token_budget``) or "packed" (``batch_size`` rows of ``seq_len`` tokens); lengths are
    padded to a multiple of ``pad_multiple``, to explicit ``boundaries`` (a list of lengths), or to
    ``auto_buckets`` (or ``boundaries="auto"``: 8) lengths chosen from the dataset; ``max_length`` truncates rows
    (0: no limit); ``remainder`` "drop" or "wrap" for the batches that do not divide among ranks, or "keep"
    (uneven ranks). ``shuffle=False`` keeps the dataset's order (bucketed and tokens policies).
    ``shuffle_window`` W > 0 reads the dataset in shuffled blocks of W consecutive rows, each batch from one block:
    locality for a dataset the server fetches from object storage into a cache smaller than the dataset (rows that
    are near each other in the dataset then meet in batches more often than under the default global shuffle).
    ``planner`` "auto" (exact plans up to 2^27 rows, lazy windowed plans above), "exact" or "lazy" (O(windows)
    memory and a first batch in milliseconds at any size; docs/planning-at-scale.md compares them).

    Transport: ``"shm"`` (same host: batches are assembled by the server in a shared-memory ring and copied once from
    it, to the device with ``device="cuda"``) or ``"grpc"`` (any host). ``prefetch`` is how many batches the server
    may run ahead of what this consumer has received.

    ``Loader("data/wiki", ...)``: a dataset directory (or ``s3://bucket/prefix``, or a mapping of them to weights)
    as the only positional argument finds this node's server for this user and job, or starts one from the gload
    binary (the wheel's, else ``$GLOAD_BIN``, a checkout's bin/gload or PATH's), and has it open the path; every
    rank and DataLoader worker of the job shares that server, which exits a short idle time after its last client
    leaves (settings: :func:`gload.configure_server`; see docs/install.md). ``loader.dataset`` is then the name the
    server serves the path by (after the first connection), ``loader.paths`` maps names to paths, and errors and
    :meth:`report` name the server's log. A path given with an address is opened on that server instead.

    ``addr`` is ``unix:///path.sock`` or ``host:port``; None is the server's default (``$GLOAD_ADDR``, else the
    user's socket ``$XDG_RUNTIME_DIR/gload.sock``, else ``/tmp/gload-<uid>/gload.sock``). ``auth_token`` is the bearer
    token of a server started with ``--auth-token-file`` (default: ``$GLOAD_AUTH_TOKEN``, else the content of the file
    ``$GLOAD_AUTH_TOKEN_FILE``).

    Times are in seconds: ``timeout`` bounds each wait for a batch while iterating (None: no bound; :meth:`next`
    takes its own), ``connect_timeout`` the first connection, ``reconnect_timeout`` the reconnection after the server
    went away (0: raise :class:`gload.errors.ServerUnavailable` at once instead).
    """

    def __init__(
        self,
        addr: Union[None, Address, str, Mapping[str, float]],
        dataset: Union[None, str, Mapping[str, float]] = None,
        batch_size: Optional[int] = None,
        policy: str = "bucketed",
        pad_multiple: int = 64,
        seed: Optional[int] = None,
        epoch: int = 0,
        prefetch: int = 8,
        transport: str = "shm",
        device: Any = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        worker: Optional[int] = None,
        num_workers: Optional[int] = None,
        max_length: int = 0,
        boundaries: Union[None, str, Sequence[int]] = None,
        auto_buckets: int = 0,
        token_budget: int = 0,
        seq_len: int = 0,
        remainder: Optional[str] = None,
        labels: Union[bool, str] = True,
        pad_id: Optional[int] = None,
        position_start: int = 0,
        timeout: Optional[float] = None,
        client_id: Optional[str] = None,
        *,
        dtype: Any = None,
        return_tensors: Optional[str] = None,
        keys: Optional[Sequence[str]] = None,
        mega_batch_mult: int = 0,
        warmup: bool = True,
        split_docs: bool = False,
        shuffle_window: int = 0,
        planner: str = "auto",
        connect_timeout: float = 10.0,
        reconnect_timeout: float = 60.0,
        auth_token: Optional[str] = None,
        mix_by: str = "samples",
        epoch_until: Optional[str] = None,
        epoch_samples: int = 0,
        epoch_tokens: int = 0,
        allow_tokenizer_mismatch: bool = False,
        single_source_batches: bool = False,
        shuffle: bool = True,
        eval: bool = False,
        ignore_index: int = _keys.DEFAULT_IGNORE_INDEX,
        static_buffers: bool = False,
        zero_copy: bool = False,
    ) -> None:
        # What the caller set, for integrations that take unset settings from elsewhere (gload.hf).
        self._given = {k for k, v in (("batch_size", batch_size), ("seed", seed), ("remainder", remainder)) if v is not None}
        if eval:
            if shuffle is not True and shuffle is not False:
                raise ValueError(f"shuffle {shuffle!r}: want True or False")
            if remainder not in (None, "keep"):
                raise ValueError(f"eval=True deals every batch once (remainder 'keep'); remainder={remainder!r} contradicts it")
            shuffle, remainder, warmup = False, "keep", False
        batch_size = 16 if batch_size is None else batch_size
        seed = 0 if seed is None else seed
        remainder = "drop" if remainder is None else remainder
        if remainder not in ("drop", "wrap", "keep"):
            raise ValueError(f"remainder {remainder!r}: want 'drop', 'wrap' or 'keep'")
        if pad_id is not None and (not isinstance(pad_id, (int, np.integer)) or isinstance(pad_id, bool)):
            raise ValueError(f"pad_id: want a token id or None (the dataset's pad token), got {pad_id!r}")
        # Loader("data/wiki"): a dataset path (or mapping of paths) alone; paths are opened on this node's job server,
        # started if none runs (gload._autostart), or on the server at an explicit address.
        # No gRPC here (a Loader is made before DataLoader workers fork): the server is found or started with plain
        # socket calls, and the paths are opened (OpenPath) by each process on its first connection (_api).
        addr, dataset, paths = _autostart.split_args(addr, dataset)
        self._auth_token = _auth_token(auth_token)
        self._auto: Optional[_autostart.Server] = None
        # Dataset paths: [the key standing for it in dataset (the path, then the name it is served by), path].
        self._path_keys: List[List[str]] = [[p, p] for p in paths]
        if paths:
            addr, self._auto = _autostart.attach(addr)
            tf = _autostart.current_settings().get("auth_token_file")
            if self._auto is not None and self._auth_token is None and tf:
                self._auth_token = read_token_file(tf)
            log.info("gload: %s from %s", ", ".join(paths), self._auto.describe() if self._auto else addr)
        self.addr, self._target = resolve(addr)
        if not dataset:
            raise ValueError("dataset: a name the server serves (or a mapping of names to weights) is required")
        self._mixture: List[Tuple[str, float]] = []
        if isinstance(dataset, Mapping):
            for name, w in dataset.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"dataset: mixture source {name!r}: want a dataset name")
                if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) or not (
                        math.isfinite(float(w)) and float(w) >= 0):
                    raise ValueError(f"dataset: mixture weight of {name!r} is {w!r}: want a finite number >= 0")
                self._mixture.append((name, float(w)))
            dataset = ",".join(f"{n}:{w:g}" for n, w in self._mixture)
        if mix_by not in ("samples", "tokens"):
            raise ValueError(f"mix_by {mix_by!r}: want 'samples' or 'tokens'")
        for name, v in (("epoch_samples", epoch_samples), ("epoch_tokens", epoch_tokens)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name}: want an integer >= 0, got {v!r}")
        self._mix = dict(mix_by="" if mix_by == "samples" else mix_by, epoch_until=epoch_until or "",
                         epoch_samples=int(epoch_samples), epoch_tokens=int(epoch_tokens),
                         allow_tokenizer_mismatch=bool(allow_tokenizer_mismatch),
                         single_source_batches=bool(single_source_batches))
        self.dataset = dataset
        if transport not in ("shm", "grpc"):
            raise ValueError(f"transport {transport!r}: want 'shm' or 'grpc'")
        self.transport = transport
        for name, v in (("seed", seed), ("epoch", epoch), ("prefetch", prefetch), ("batch_size", batch_size),
                        ("pad_multiple", pad_multiple), ("max_length", max_length), ("auto_buckets", auto_buckets),
                        ("token_budget", token_budget), ("seq_len", seq_len), ("mega_batch_mult", mega_batch_mult),
                        ("shuffle_window", shuffle_window)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name}: want an integer >= 0, got {v!r}")
        self.seed = int(seed)
        self.epoch = int(epoch)
        self.prefetch = int(prefetch)
        if planner not in ("auto", "exact", "lazy"):
            raise ValueError(f"planner {planner!r}: want 'auto', 'exact' or 'lazy'")
        if boundaries == "auto":
            boundaries, auto_buckets = None, auto_buckets or 8
        elif isinstance(boundaries, str):
            raise ValueError(f"boundaries {boundaries!r}: want a list of lengths or 'auto'")
        self._policy = pb.BatchPolicy(
            policy=policy, batch_size=int(batch_size), token_budget=int(token_budget), seq_len=int(seq_len),
            max_length=int(max_length), pad_multiple=int(pad_multiple),
            boundaries=[int(b) for b in (boundaries or [])], auto_buckets=int(auto_buckets),
            mega_batch_mult=int(mega_batch_mult), remainder=remainder, no_warmup=not warmup or not shuffle,
            split_docs=split_docs, position_start=int(position_start), pad_id=int(pad_id or 0),
            pad_id_set=pad_id is not None, sequential=not shuffle, shuffle_window=int(shuffle_window),
            planner="" if planner == "auto" else planner)
        self.shuffle = bool(shuffle)
        self.eval = bool(eval)
        self._rank, self._world, self._worker, self._workers = rank, world_size, worker, num_workers
        for name, v in (("rank", rank), ("world_size", world_size), ("worker", worker), ("num_workers", num_workers)):
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 0):
                raise ValueError(f"{name}: want an integer >= 0 or None, got {v!r}")
        want_labels, self.shift_labels = _keys.check_labels(labels)
        self.labels = labels
        self.ignore_index = int(ignore_index)
        self.position_start = int(position_start)
        self.timeout = _seconds(timeout, "timeout")
        self.client_id = client_id
        self.keys = _keys.check_keys(keys, policy or "bucketed", want_labels)
        self._want_labels = want_labels
        self.connect_timeout = _patience(connect_timeout, "connect_timeout")
        self.reconnect_timeout = _patience(reconnect_timeout, "reconnect_timeout")
        if return_tensors is None:
            return_tensors = "pt" if torch is not None else "np"
        if return_tensors not in ("pt", "np"):
            raise ValueError(f"return_tensors {return_tensors!r}: want 'pt' or 'np'")
        if return_tensors == "pt" and torch is None:
            raise ValueError("return_tensors='pt' needs torch, which is not importable")
        self.return_tensors = return_tensors
        self.dtype = dtype
        self._dtypes = _keys.check_dtypes(dtype, return_tensors)
        self.device = self._check_device(device)
        if static_buffers is not True and static_buffers is not False:
            raise ValueError(f"static_buffers {static_buffers!r}: want True or False")
        if static_buffers and not self._cuda_output():
            raise ValueError("static_buffers=True keeps a batch's device tensors for CUDA graphs: it needs "
                             f"device='cuda' (device is {device!r})")
        self.static_buffers = static_buffers
        self.zero_copy = self._check_zero_copy(zero_copy, dtype)
        self._pending: Optional[State] = None  # a loaded state, used by the next stream of its epoch
        # Where the stream of the object this one was copied from (pickle, fork) stood: next() continues there.
        self._resume_point: Optional[State] = None
        self._exhausted = False
        self._init_epochs()
        self._init_runtime()
        self._reset_position()
        _live.add(self)

    # -- configuration helpers -------------------------------------------------------------------------------------

    def _cuda_output(self) -> bool:
        return self.device is not None and getattr(self.device, "type", "") == "cuda"

    def _check_device(self, device: Any) -> Any:
        if device is None:
            return None
        if self.return_tensors != "pt":
            if torch is None:
                raise ValueError(
                    f"device={device!r} needs torch, which is not importable in this Python ({sys.executable}); "
                    "install torch, or leave device unset to get numpy arrays"
                )
            raise ValueError("device needs torch tensors (return_tensors='pt')")
        return torch.device(device)

    # -- process safety --------------------------------------------------------------------------------------------
    #
    # A Loader is a description until it is iterated: the channel, the stream and the ring belong to the process
    # that opened them (``_pid``) and are made lazily. A copy of the object — pickled to a spawn/forkserver
    # DataLoader worker, or inherited by a forked one — carries the description and the position of the stream it
    # was copied from (``_resume_point``: ``next()`` continues there, ``state_dict()`` reports it, a new ``for``
    # loop starts the epoch as the original's would), never the connection. Before a fork (os.register_at_fork)
    # every Loader of the process ends its stream and closes its channel, keeping its position (its next batch
    # comes from a reopened stream, exactly where it stood), so that no gRPC call is live across the fork; the child
    # never touches what it inherited (parked in ``_inherited``) and opens its own channel — where this grpcio can
    # (gload._channel.grpc_fork_safe), else it raises ForkUnsafe before touching gRPC.

    def _init_runtime(self) -> None:
        """Per-process state: never pickled, rebuilt in a forked or spawned DataLoader worker."""
        self._pid = os.getpid()
        self._channel: Optional[grpc.Channel] = None
        self._server = UNKNOWN  # who runs the server (its peer credentials), checked before the channel is opened
        self._stub: Optional[pb_grpc.LoaderStub] = None
        self._stream: Optional[Stream] = None
        self._stats = Stats()
        self._source_rows: Dict[str, int] = {}  # mixtures: rows (packed: documents) handed out per source
        self._trained_tokens = 0  # SFT datasets: labels other than -100 handed out
        self._real_tokens = 0  # and the real (unpadded) tokens beside them
        self._source_tokens: Dict[str, int] = {}

    def _reset_position(self) -> None:
        """Forgets where the current (or last) stream of this epoch stands."""
        self._opened: Optional[pb.Opened] = None
        self._worker_index = 0
        self._base_consumed = 0  # the global consumed count when the stream opened
        self._handed: Optional[int] = None  # rank_step of the last batch handed out by the stream

    def _init_epochs(self) -> None:
        """Which epoch the next iteration runs (see :meth:`set_epoch`; gload/_accelerate.py); pickled."""
        self._finished = False  # the epoch self.epoch ran to its end: a new iteration starts the next one
        self._epoch_pinned = False  # set_epoch chose the epoch since the last iteration started
        self._wrapper_epoch: Optional[int] = None  # the epoch the last accelerate wrapper iteration ran
        self._wrapper_ready = False  # an accelerate wrapper just chose this iteration's epoch and position
        self._lookahead = 0  # batches the consumer of this iteration reads ahead of what it hands on (accelerate: 1)
        self._acc_loaded = False  # the state was loaded by accelerate's load_state: len() is the whole epoch

    def _copied_position(self) -> Optional[State]:
        """The position a copy of this object continues from: the live stream's state, if one is open."""
        if self._opened is not None and not self._exhausted:
            return self.state_dict()
        return self._resume_point

    def __getstate__(self) -> Dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in _RUNTIME_FIELDS}
        # A spawned DataLoader worker has no torch.distributed: pin the rank now, in the parent.
        d["_rank"], d["_world"] = self._rank_world()
        d["_resume_point"] = self._copied_position()
        # Protocol messages are not pickled (their classes are an implementation detail): their bytes are.
        d["_policy"] = self._policy.SerializeToString()
        return d

    def __setstate__(self, d: Dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._policy = pb.BatchPolicy.FromString(d["_policy"])
        self._init_runtime()
        self._reset_position()
        _live.add(self)

    def _forked(self) -> bool:
        """Whether this object was inherited from a parent process by a fork the at-fork hook did not see (a fork
        made outside Python's os.fork): adopt it as a copy."""
        if self._pid == os.getpid():
            return False
        self._adopt_after_fork()
        return True

    def _park_before_fork(self) -> None:
        """In a process about to fork: end this object's stream and close its channel, so that no gRPC call or
        connection of this process is live while the child starts; ``next()`` reopens where it stood."""
        if self._pid != os.getpid():
            return
        if self._stream is not None:
            self._resume_point = self._copied_position()
            self._close_stream()
            self._reset_position()
        if self._channel is not None:
            ch, self._channel, self._stub = self._channel, None, None
            ch.close()

    def _adopt_after_fork(self) -> None:
        """In a forked child: park the parent's channel, stream and ring untouched, keep the position."""
        if self._pid == os.getpid():
            return
        self._resume_point = self._copied_position()
        _inherited.append((self._channel, self._stub, self._stream))
        self._init_runtime()
        self._reset_position()

    def _rank_world(self) -> Tuple[int, int]:
        rank, world = self._rank, self._world
        if (rank is None or world is None) and torch is not None:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank() if rank is None else rank
                world = dist.get_world_size() if world is None else world
        return int(rank or 0), int(world or 1)

    def _consumer(self) -> Tuple[int, int, int, int]:
        """(rank, world_size, worker, num_workers) with explicit arguments first, then torch's."""
        rank, world = self._rank_world()
        worker, workers = self._worker, self._workers
        info = torch.utils.data.get_worker_info() if torch is not None else None
        if info is not None:
            worker = info.id if worker is None else worker
            workers = info.num_workers if workers is None else workers
        return rank, world, int(worker or 0), int(workers or 1)

    def _api(self) -> pb_grpc.LoaderStub:
        self._forked()
        if self._stub is None:
            by = _public_caller(sys._getframe(1))
            self._channel, self._server = open_checked_channel(self._target, self._auth_token, by=by, options=[
                # Never share a connection with another channel of this process.
                ("grpc.use_local_subchannel_pool", 1),
                ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", 1 << 20),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.min_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
                ("grpc.enable_retries", 0),
            ])
            self._stub = pb_grpc.LoaderStub(self._channel)
            if self._path_keys:
                self._open_paths(self._stub)
        return self._stub

    def _server_uid(self) -> int:
        """The server's uid: the owner its rings must have (checked again if no server answered at the first check)."""
        if self._server.uid < 0:
            self._server = check_server(self._target)
        return self._server.uid

    @property
    def paths(self) -> Dict[str, str]:
        """The dataset paths this Loader was given, by the name the server serves each by (the path itself until
        the first connection opened them)."""
        return {k: p for k, p in self._path_keys}

    def _open_paths(self, stub: pb_grpc.LoaderStub) -> None:
        """Opens the dataset paths on the server (OpenPath: idempotent, once per connection of each process, so a
        server started afresh learns them too) and names them in ``dataset`` as the server does."""
        try:
            names = _autostart.open_paths(stub, self.addr, [p for _, p in self._path_keys], _OPEN_TIMEOUT_S)
        except GloadError as e:
            ch, self._channel, self._stub = self._channel, None, None
            if ch is not None:
                ch.close()
            if isinstance(e, ServerUnavailable):
                raise
            raise type(e)(f"{e}{self._server_note()}") from None
        rename = {}
        for kp in self._path_keys:
            rename[kp[0]] = names[kp[1]]
            kp[0] = names[kp[1]]
        if self._mixture:
            self._mixture = [(rename.get(n, n), w) for n, w in self._mixture]
            self.dataset = ",".join(f"{n}:{w:g}" for n, w in self._mixture)
        else:
            self.dataset = rename.get(self.dataset, self.dataset)

    def _open_msg(self, consumer: Tuple[int, int, int, int], resume: Optional[pb.ResumeState]) -> pb.Open:
        rank, world, worker, workers = consumer
        cid = self.client_id or f"{socket.gethostname()}/{os.getpid()}/rank{rank}-w{worker}"
        mix: Dict[str, Any] = {}
        if self._mixture:
            mix = dict(self._mix, mixture=[pb.MixtureSource(dataset=n, weight=w) for n, w in self._mixture])
        elif any(self._mix.values()):
            mix = dict(self._mix)
        return pb.Open(
            **mix,
            dataset="" if self._mixture else self.dataset, rank=rank, world_size=world, worker=worker, num_workers=workers, seed=self.seed,
            epoch=self.epoch, policy=self._policy, resume=resume,
            transport=pb.TRANSPORT_SHM if self.transport == "shm" else pb.TRANSPORT_GRPC,
            shm_doorbell=self.transport == "shm" and _SHM_DOORBELL,
            prefetch=self.prefetch, client_id=cid)

    # -- streams ---------------------------------------------------------------------------------------------------

    def _resume_for(self, consumer: Tuple[int, int, int, int]) -> Tuple[Optional[pb.ResumeState], int]:
        """The resume state to open with, and the global consumed count it stands for. A state saved by a consumer
        of the same split (world size, worker, worker count) resumes that consumer where it stopped; any other is
        resumed from its global position."""
        st = self._pending
        if st is None or st["epoch"] != self.epoch:
            return None, 0
        _, world, worker, workers = consumer
        at = st["consumed"]
        if (st.get("world_size") == world and st.get("num_workers") == workers and st.get("worker") == worker
                and "resume_at" in st):
            at = st["resume_at"]
        rs = pb.ResumeState(fingerprint=st["fingerprint"], seed=st["seed"], epoch=st["epoch"],
                            policy_hash=st["policy_hash"], consumed=at, plan_world=st["plan_world"])
        return rs, st["consumed"]

    def _check_zero_copy(self, zero_copy: Any, dtype: Any) -> bool:
        """Validates ``zero_copy`` against the other settings; with it, input_ids and position_ids come as the ring
        holds them (int32) unless ``dtype`` asked for another dtype, which is an error."""
        if zero_copy is not True and zero_copy is not False:
            raise ValueError(f"zero_copy {zero_copy!r}: want True or False")
        if not zero_copy:
            return False
        why = "zero_copy=True hands out read-only views of the shared-memory ring, valid until the next next() call"
        if self.transport != "shm":
            raise ValueError(f"{why}: it needs transport='shm' (got {self.transport!r})")
        if self.return_tensors != "np":
            raise ValueError(f"{why}: it needs return_tensors='np' (a torch tensor over the read-only mapping "
                             "would crash the process on an in-place write)")
        if self.device is not None:
            raise ValueError(f"{why}: with device={self.device!r} the copy to the device is the hand-off; "
                             "leave zero_copy=False")
        for k in ("input_ids", "position_ids"):
            if dtype is not None and self._dtypes[k] != np.dtype(np.int32):
                raise ValueError(f"{why}: {k} comes as the ring holds it, int32, but dtype asks for {self._dtypes[k]}")
            self._dtypes[k] = np.dtype(np.int32)
        return True

    def _converter(self, ring: Optional[Ring], layout: Optional[pb.SlotLayout]) -> Converter:
        return Converter(tensors=self.return_tensors, device=self.device, dtypes=self._dtypes,
                         labels=self._want_labels, position_start=self.position_start, keys=self.keys, ring=ring,
                         layout=layout, shift_labels=self.shift_labels, ignore_index=self.ignore_index,
                         static_buffers=self.static_buffers, zero_copy=self.zero_copy)

    def _start(self, patience: float) -> None:
        """Opens this epoch's stream (from the loaded state, if any), retrying an unreachable server for
        ``patience`` seconds."""
        self._close_stream()
        consumer = self._consumer()
        if (self.device is not None and self.device.type == "cuda"
                and torch.utils.data.get_worker_info() is not None):
            raise InvalidArgument(
                "device='cuda' inside a DataLoader worker: CUDA does not work in forked workers; leave device=None "
                "there (and use pin_memory=True), or use num_workers=0: gload already prefetches on a thread")
        if self.zero_copy and torch is not None and torch.utils.data.get_worker_info() is not None:
            raise InvalidArgument(
                "zero_copy=True inside a DataLoader worker: the worker sends batches to the main process after its "
                "next() call returned the slot to the server, so views would change under it; leave zero_copy=False "
                "in workers (or iterate the Loader in the main process: gload already prefetches)")
        resume, base = self._resume_for(consumer)
        deadline = time.monotonic() + patience
        backoff = 0.05
        reattached = False
        while True:
            try:
                api = self._api()  # first: it opens dataset paths, naming them in the Open message
                self._stream = Stream(api.Batches, self._open_msg(consumer, resume), self.addr, _OPEN_TIMEOUT_S,
                                      _weak_method(self._converter), _weak_method(self._server_uid))
                break
            except ServerUnavailable as e:
                if self._auto is not None and not reattached:
                    reattached = True  # the job's server exited (idle, or its starter died): find or start it again
                    self._reattach()
                    continue
                if time.monotonic() + backoff > deadline:
                    raise ServerUnavailable(f"gload server {self.addr} unreachable for {patience:g} s: {e}"
                                            f"{self._server_note()}") from None
                time.sleep(backoff)
                backoff = min(2 * backoff, 1.0)
        o = self._stream.opened
        assert o is not None
        self._opened = o
        self._worker_index = consumer[2]
        self._base_consumed = base if resume is not None else o.start.consumed
        self._handed = None
        self._pending = None
        self._exhausted = False

    def _reattach(self) -> None:
        """Finds or starts the job's server again; the next connection reopens this Loader's dataset paths."""
        assert self._auto is not None
        addr, self._auto = _autostart.attach(None)
        if self._channel is not None:
            ch, self._channel, self._stub = self._channel, None, None
            ch.close()
        self.addr, self._target = resolve(addr)
        log.info("gload: reattached to %s", self._auto.describe() if self._auto else addr)

    def _server_note(self) -> str:
        """What errors say about a server this Loader found or started (its log), else nothing."""
        return f" ({self._auto.describe()})" if self._auto is not None else ""

    def _close_stream(self) -> None:
        if self._forked():
            return
        if self._stream is not None:
            s, self._stream = self._stream, None
            s.close()

    def __iter__(self) -> "Epoch":
        """Starts an epoch (from its beginning, or from the state given to :meth:`load_state_dict`) and returns its
        iterator; iterating the returned iterator again goes on where it stands. Which epoch: the one
        :meth:`set_epoch` picked, else the next one when the last iteration ran its epoch to the end (or the loaded
        state stood at its epoch's end), else the current one again (an iteration left before its end starts that
        epoch again)."""
        self._forked()
        self._resume_point = None
        if self._wrapper_ready:  # accelerate's wrapper chose the epoch and position just now (set_epoch)
            self._wrapper_ready = False
            self._lookahead = 1
        else:
            self._lookahead = 0
            if self._finished:
                self._advance_epoch()
            elif (self._pending is not None and not self._epoch_pinned and self._pending["epoch"] == self.epoch
                  and self._left_after_pending() == 0):
                self._advance_epoch()
        self._epoch_pinned = False
        _accelerate.iteration_skip(self, sys._getframe(1))
        self._start(self.connect_timeout)
        self._stats.reset_step_clock()
        return Epoch(self)

    def next(self, timeout: Optional[float] = _UNSET) -> Dict[str, Any]:
        """Returns the next batch of the epoch, waiting at most ``timeout`` seconds (default: the Loader's
        ``timeout``; None or ``math.inf``: no bound; NaN or a negative number: ValueError) and raising
        ``TimeoutError`` after that; ``StopIteration`` at the end of the epoch. Starts the epoch if no ``for`` loop
        did."""
        stream = self._stream
        if stream is not None and stream.on_caller_thread and timeout is _UNSET and self._pid == os.getpid():
            # A doorbell stream whose next batch is already in its slot: taken and converted here, nothing waited.
            t0, step = self._stats.begin()
            try:
                r = stream.take()
            except GloadError:  # (a slot rewritten under the client: as a failed stream below)
                self._close_stream()
                self._exhausted = True
                raise
            if r is not None:
                return self._hand_out(stream, r, t0, step)
        timeout = self.timeout if timeout is _UNSET else _seconds(timeout, "timeout")
        if self._forked() or self._stream is None:
            if self._exhausted:
                raise StopIteration
            if self._resume_point is not None:  # a copy (or a stream parked for a fork) continues where it stood
                self._pending, self._resume_point = self._resume_point, None
            self._start(self.connect_timeout)
        t0, step = self._stats.begin()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            stream = self._stream
            assert stream is not None
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                r = stream.get(left)
            except queue.Empty:
                raise TimeoutError(f"gload: no batch from {self.addr} within {timeout:g} s "
                                   f"(dataset {self.dataset}, {self._describe()})") from None
            except GloadError as e:
                if getattr(e, "gload_retry", False) and self.reconnect_timeout > 0:
                    self._reconnect(e)
                    continue
                self._close_stream()
                self._exhausted = True
                raise
            break
        if r is None:
            self._close_stream()
            self._exhausted = True
            self._finished = True
            raise StopIteration
        return self._hand_out(stream, r, t0, step)

    def _hand_out(self, stream: Stream, r: Any, t0: float, step: float) -> Dict[str, Any]:
        """Acknowledges batch r, reports the step, keeps the position and the counts, and returns r's batch
        (t0: when next() was entered; step: the loop's time since the previous batch)."""
        waited = time.perf_counter() - t0
        stream.ack(r)
        stream.report(r.seq, waited, step)
        self._handed = r.rank_step
        conv = stream.converter
        assert conv is not None
        if conv.cuda:
            conv.hand_out(r.data)
        if conv.source_offsets is not None:
            counts = conv.pop_source_counts(r.data)
            if counts is not None and stream.opened is not None:
                rows, tokens = counts
                for s, name in enumerate(stream.opened.sources):
                    self._source_rows[name] = self._source_rows.get(name, 0) + int(rows[s])
                    if tokens is not None:
                        self._source_tokens[name] = self._source_tokens.get(name, 0) + int(tokens[s])
        if conv.stored_labels:
            lc = conv.pop_label_counts(r.data)
            if lc is not None:
                self._trained_tokens += lc[0]
                self._real_tokens += lc[1]
        self._stats.end(t0, waited, step)
        return r.data

    def _reconnect(self, cause: BaseException) -> None:
        """The server went away: reopen from the last batch handed out, on a server that is back."""
        state = self.state_dict()
        log.warning("gload: stream to %s lost (%s); reconnecting from consumed=%d", self.addr, cause,
                    state["consumed"])
        self._close_stream()
        self._pending = state
        try:
            self._start(self.reconnect_timeout)
        except ServerUnavailable as e:
            self._pending = state
            self._exhausted = True
            raise ServerUnavailable(f"gload server {self.addr} went away ({cause}) and did not come back within "
                                    f"{self.reconnect_timeout:g} s; resume later with load_state_dict(state){self._server_note()}") from e
        self._stats.reconnects += 1

    def _describe(self) -> str:
        rank, world, worker, workers = self._consumer()
        return f"rank {rank}/{world}, worker {worker}/{workers}, {self.transport}"

    # -- epochs and state ------------------------------------------------------------------------------------------

    def _advance_epoch(self) -> None:
        """The next iteration runs the epoch after this one, from its beginning."""
        self._pick_epoch(self.epoch + 1)

    def _left_after_pending(self) -> int:
        """This rank's batches left in the epoch after the loaded state."""
        rank, world, _, _ = self._consumer()
        resume, _ = self._resume_for((rank, world, 0, 1))
        return int(self._plan(worker=0, workers=1, resume=resume).batches)

    def _pick_epoch(self, epoch: int) -> None:
        """The next iteration runs ``epoch`` (from a state loaded for it, else from its beginning)."""
        epoch = int(epoch)
        if self._pending is not None and self._pending["epoch"] != epoch:
            self._pending = None
        if epoch != self.epoch or self._finished:
            self._close_stream()
            self._opened = None
            self._handed = None
            self._resume_point = None
        self.epoch = epoch
        self._exhausted = False
        self._finished = False

    def set_epoch(self, epoch: int) -> None:
        """Picks the epoch the next ``for`` loop runs (as DistributedSampler.set_epoch). A state loaded for that
        epoch is kept, so loading a state and then calling set_epoch(state epoch) resumes where it stopped.

        Without it, a new ``for`` loop after one that ran its epoch to the end runs the next epoch (as Mosaic
        streaming does); set_epoch always wins, even set_epoch of the epoch just finished (which runs it again).
        Called by accelerate's prepared DataLoader at the start of each of its iterations (with its own count of
        iterations), it is read as "a new iteration starts": see gload/_accelerate.py."""
        if _accelerate.wrapper_set_epoch(self, sys._getframe(1), epoch):
            return
        if int(epoch) < 0:
            raise ValueError(f"set_epoch: want an epoch >= 0, got {epoch!r}")
        self._pick_epoch(int(epoch))
        self._epoch_pinned = True

    def state_dict(self, batches: Optional[int] = None) -> State:
        """The resume state after the last batch this object handed out (not the read-ahead): global and small,
        ``{"fingerprint", "seed", "epoch", "policy_hash", "consumed", "plan_world"}`` plus where this consumer's
        next batch is for a consumer of the same split (``world_size``, ``worker``, ``num_workers``,
        ``resume_at``) — what torchdata's StatefulDataLoader stores per worker.

        ``batches=n`` instead gives the state after the first n batches of this epoch's rank (counted from the
        loaded state, if any): what a main process needs when the batches came through ``DataLoader(num_workers>0)``
        workers, which this object never sees. Their order is the rank's plan order, so n batches = n rank steps.
        """
        if batches is not None:
            return self._state_after(int(batches))
        if self._pending is not None and self._pending["epoch"] == self.epoch:
            return dict(self._pending)
        if self._opened is None and self._resume_point is not None:
            return dict(self._resume_point)
        o = self._opened
        if o is None:
            return self._state_after(0)
        start = o.start
        world, workers, worker = max(o.world_size, 1), max(o.num_workers, 1), self._worker_index
        k = self._handed
        if k is not None and self._lookahead and not self._exhausted and workers == 1:
            # The consumer (accelerate's wrapper) holds the last batch handed out and has not passed it on yet.
            k = k - self._lookahead if k >= self._lookahead else None
        if k is None:
            consumed, resume_at = self._base_consumed, start.consumed
        else:
            consumed = start.consumed + (k + 1) * world
            resume_at = start.consumed + (k + workers - worker) * world
        return {
            "version": _STATE_VERSION, "fingerprint": start.fingerprint, "seed": start.seed, "epoch": start.epoch,
            "policy_hash": start.policy_hash, "consumed": consumed, "plan_world": start.plan_world,
            "world_size": world, "worker": worker, "num_workers": workers, "resume_at": resume_at,
        }

    def _state_after(self, n: int) -> State:
        if n < 0:
            raise ValueError(f"batches: want >= 0, got {n}")
        rank, world, _, _ = self._consumer()
        resume, base = self._resume_for((rank, world, 0, 1))
        p = self._plan(worker=0, workers=1, resume=resume)
        start = p.start
        consumed = (base if resume is not None else start.consumed) + n * world
        return {
            "version": _STATE_VERSION, "fingerprint": start.fingerprint, "seed": start.seed, "epoch": start.epoch,
            "policy_hash": start.policy_hash, "consumed": consumed, "plan_world": start.plan_world,
            "world_size": world, "worker": 0, "num_workers": 1, "resume_at": consumed,
        }

    def load_state_dict(self, state: State) -> None:
        """Resumes from ``state`` (from :meth:`state_dict`): the next ``for`` loop continues that epoch where it
        stopped — with any world size or worker count (the server recomputes the split), nothing lost or repeated.
        The seed and batch policy must be those the state was saved with; a changed dataset is refused with
        :class:`gload.errors.DatasetChanged` when the stream opens."""
        if not isinstance(state, dict):
            raise ValueError(f"load_state_dict: want a dict from state_dict(), got {type(state).__name__}")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"load_state_dict: state lacks {', '.join(missing)}")
        st = dict(state)
        for k in ("seed", "epoch", "consumed", "plan_world"):
            st[k] = int(st[k])
        if st["seed"] != self.seed:
            raise ValueError(f"load_state_dict: the state was saved with seed {st['seed']}, this loader has seed "
                             f"{self.seed}")
        self._close_stream()
        self._opened = None
        self._handed = None
        self._resume_point = None
        self._exhausted = False
        self._init_epochs()
        self._acc_loaded = _accelerate.loaded_by_accelerate(sys._getframe(1))
        self.epoch = st["epoch"]
        self._pending = st

    # -- information -----------------------------------------------------------------------------------------------

    def _plan(self, worker: Optional[int] = None, workers: Optional[int] = None,
              resume: Optional[pb.ResumeState] = None) -> pb.PlanResponse:
        rank, world, w, nw = self._consumer()
        consumer = (rank, world, w if worker is None else worker, nw if workers is None else workers)
        for attempt in (0, 1):
            try:
                api = self._api()
                msg = self._open_msg(consumer, resume)
                return api.Plan(pb.PlanRequest(open=msg), timeout=_rpc_timeout(max(self.connect_timeout, _OPEN_TIMEOUT_S)))
            except grpc.RpcError as e:
                err = translate(e, self.addr, "plan")
            except ServerUnavailable as e:
                err = e
            if not (isinstance(err, ServerUnavailable) and self._auto is not None and attempt == 0):
                raise err from None
            self._reattach()  # the job's server exited (idle, or its starter died): find or start it again
        raise AssertionError("unreachable")

    def shapes(self) -> List[Tuple[int, int]]:
        """The distinct (rows, length) shapes of this epoch's batches, longest first (the order of the warm-up
        batches the epoch opens with): for loops that warm up or compile once per shape."""
        return [(s.rows, s.length) for s in self._plan().shapes]

    def plan(self) -> Dict[str, Any]:
        """This consumer's share of the epoch: ``batches``, ``global_batches``, ``shapes`` and ``padding_share``
        (padded tokens / all tokens of the plan)."""
        p = self._plan()
        return {"batches": p.batches, "global_batches": p.global_batches,
                "shapes": [(s.rows, s.length) for s in p.shapes], "padding_share": p.padding_share}

    @property
    def sampler(self) -> Any:
        """(Not a DataLoader: no sampler.) Raises AttributeError saying what to do, for code that takes the Loader for
        a DataLoader, such as accelerate's ``skip_first_batches(loader, n)`` after ``prepare(loader)``."""
        raise AttributeError(
            "gload.Loader is a dataset that batches itself, not a DataLoader: it has no sampler. It resumes from its "
            "own state (load_state_dict, or accelerator.register_for_checkpointing(loader)), so nothing has to skip "
            "batches: iterate the loader itself instead of skip_first_batches(loader, n), or pass "
            "DataLoader(loader, batch_size=None) to accelerator.prepare, whose skip_first_batches gload takes as a "
            "no-op")

    def __len__(self) -> int:
        """Batches this rank has left in the epoch (all its workers together): the whole epoch, or, after
        :meth:`load_state_dict`, what is left after the loaded state — what ``len(DataLoader(loader))`` and
        torchdata's StatefulDataLoader report after a resume (after the StatefulDataLoader's own
        ``load_state_dict`` too, until its next iteration starts). :meth:`epoch_batches` is the whole epoch.

        Asked by accelerate's prepared DataLoader (``len(train_dataloader)``), or after a state loaded by
        accelerate's ``load_state``, it is the whole epoch: scripts written for accelerate compute the epoch and the batches to skip from it after ``load_state``, and gload takes their
        ``skip_first_batches`` as the position it already holds (gload/_accelerate.py)."""
        caller = sys._getframe(1)
        if self._acc_loaded or _accelerate.wrapper_of(self, caller, depth=4) is not None:
            return self.epoch_batches()
        held = _torchdata.pending_state(self, caller)
        if held is not None and int(held["epoch"]) == self.epoch:  # a StatefulDataLoader's own load_state_dict
            return int(self._plan(worker=0, workers=1, resume=pb.ResumeState(
                fingerprint=held["fingerprint"], seed=int(held["seed"]), epoch=int(held["epoch"]),
                policy_hash=held["policy_hash"], consumed=int(held["consumed"]),
                plan_world=int(held["plan_world"]))).batches)
        rank, world, _, _ = self._consumer()
        resume, _ = self._resume_for((rank, world, 0, 1))
        return int(self._plan(worker=0, workers=1, resume=resume).batches)

    def epoch_batches(self) -> int:
        """Batches this rank gets in the whole epoch, whatever was loaded or consumed."""
        return int(self._plan(worker=0, workers=1).batches)

    def progress(self) -> Dict[str, Any]:
        """Where this consumer stands in the epoch: ``epoch``, ``batches`` (this rank's in the whole epoch),
        ``done`` (handed out, counting what a loaded state had consumed), ``left``, and ``eta_s`` (left × the mean
        loop time of the steps this process ran; None before the first step)."""
        total = self.epoch_batches()
        st = self.state_dict()
        rank, world, _, _ = self._consumer()
        p = self._plan(worker=0, workers=1, resume=pb.ResumeState(
            fingerprint=st["fingerprint"], seed=st["seed"], epoch=st["epoch"], policy_hash=st["policy_hash"],
            consumed=st["consumed"], plan_world=st["plan_world"]))
        left = int(p.batches)
        s = self._stats.summary()
        per_step = (s["wait_s"] + s["step_s"]) / s["steps"] if s["steps"] else None
        return {"epoch": self.epoch, "batches": total, "done": total - left, "left": left,
                "eta_s": None if per_step is None else left * per_step}

    def datasets(self) -> List[Dict[str, Any]]:
        """What the server serves: name, rows, tokens, fingerprint, tokenizer_hash, shards, max_length, and the pad
        token recorded when the dataset was tokenized (``pad_id``, ``pad_token``, ``pad_from``: "pad_token",
        "eos_token" or "flag"; None when none was recorded)."""
        try:
            r = self._api().ListDatasets(pb.ListDatasetsRequest(), timeout=_rpc_timeout(self.connect_timeout))
        except grpc.RpcError as e:
            raise translate(e, self.addr, "list datasets") from None
        return [{"name": d.name, "rows": d.rows, "tokens": d.tokens, "fingerprint": d.fingerprint,
                 "tokenizer_hash": d.tokenizer_hash, "shards": d.shards, "max_length": d.max_length,
                 "pad_id": d.pad_id if d.pad_from else None, "pad_token": d.pad_token or None,
                 "pad_from": d.pad_from or None}
                for d in r.datasets]

    def stats(self) -> Dict[str, float]:
        """This loader's timings since it was made (seconds; ``wait_share`` = wait / (wait + step))."""
        return self._stats.summary()

    def report(self, gpu: bool = True) -> str:
        """The starvation report: this client's data wait share, next() latency and steps, followed (``gpu``) by
        the server's GPU watch (the Watch RPC: NVML utilisation and a verdict) where the server provides it."""
        s = self._stats.summary()
        lines = [
            f"gload report: dataset {self.dataset} at {self.addr} ({self._describe()}, prefetch {self.prefetch})",
            *([f"  dataset path: {', '.join(self.paths.values())}", f"  server: {self._auto.describe()}"]
              if self._auto is not None else [f"  dataset path: {', '.join(self.paths.values())}"] if self.paths else []),
            f"  steps {s['steps']}, data wait {100 * s['wait_share']:.2f}% of loop time "
            f"({s['wait_s']:.3f} s waiting, {s['step_s']:.3f} s in steps, mean step {1e3 * s['mean_step_s']:.2f} ms)",
            f"  next(): p50 {1e6 * s['next_p50_s']:.0f} µs, p99 {1e6 * s['next_p99_s']:.0f} µs; "
            f"reconnects {s['reconnects']}",
        ]
        if self._source_rows:
            total = sum(self._source_rows.values()) or 1
            weights = dict(self._mixture)
            wsum = sum(weights.values()) or 1.0
            for name, n in self._source_rows.items():
                want = f", weight {weights[name] / wsum:.3f}" if name in weights else ""
                tok = f", {self._source_tokens[name]} tokens" if name in self._source_tokens else ""
                lines.append(f"  source {name}: {n} rows ({100 * n / total:.2f}%{want}){tok}")
        if self._real_tokens:
            lines.append(f"  trained tokens {self._trained_tokens} of {self._real_tokens} "
                         f"({100 * self._trained_tokens / self._real_tokens:.1f}%: the dataset's labels)")
        if gpu:
            lines.append(self._gpu_report())
        return "\n".join(lines)

    def source_counts(self) -> Dict[str, Dict[str, int]]:
        """Mixtures: rows (packed: documents) and tokens (not for packed batches) handed out so far, per source."""
        return {n: {"rows": r, **({"tokens": self._source_tokens[n]} if n in self._source_tokens else {})}
                for n, r in self._source_rows.items()}

    def _gpu_report(self) -> str:
        """The GPU part of the report, from the server's Watch RPC."""
        watch = getattr(self._api(), "Watch", None)
        if watch is None or not hasattr(pb, "WatchRequest"):
            return "  GPU: this client's stubs have no Watch RPC"
        try:
            for rep in watch(pb.WatchRequest(once=True), timeout=5.0):
                text = rep.text.rstrip() or f"verdict: {rep.verdict}"
                return "  GPU watch (server):\n" + "\n".join("    " + ln for ln in text.splitlines())
            return "  GPU: the server sent no report"
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                return "  GPU: the server does not watch GPUs yet (Watch RPC unimplemented)"
            return f"  GPU: watch failed: {e.details()}"

    # -- lifetime --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Ends the stream (the server frees its ring) and closes the connection. The Loader can be iterated
        again afterwards (it reconnects)."""
        if self._forked():
            return
        self._close_stream()
        if self._channel is not None:
            ch, self._channel, self._stub = self._channel, None, None
            ch.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if sys.is_finalizing():
            # gRPC's daemon threads can no longer run, and a channel's close waits for them: it would hang the exit
            # (a spawn DataLoader worker did, in CI). _close_live_at_exit closed this loader before, when it could.
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return (f"gload.Loader({self.addr!r}, {self.dataset!r}, policy={self._policy.policy or 'bucketed'!r}, "
                f"epoch={self.epoch}, transport={self.transport!r})")


class Epoch(Iterator[Dict[str, Any]]):
    """The iterator of one epoch of a :class:`Loader`: ``next(epoch)`` is ``loader.next()``."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self._checked = False

    def __iter__(self) -> "Epoch":
        return self

    def __next__(self) -> Dict[str, Any]:
        if not self._checked:
            self._checked = True
            _refuse_auto_batching(sys._getframe(1))
        return self.loader.next()


def _public_caller(frame: Any) -> str:
    """The Loader method the user called that led to ``frame`` (e.g. "len(loader)", "loader.shapes()")."""
    for _ in range(8):
        if frame is None:
            break
        name = frame.f_code.co_name
        public = name in ("__len__", "__iter__") or not name.startswith("_")
        # Only this module's frames (the Loader's methods) are looked into: a locals snapshot of the user's frame
        # would keep a dropped Loader alive.
        if public and frame.f_globals.get("__name__") == __name__ and isinstance(frame.f_locals.get("self"), Loader):
            return {"__len__": "len(loader)", "__iter__": "iter(loader)"}.get(name, f"loader.{name}()")
        frame = frame.f_back
    return ""


def _refuse_auto_batching(caller: Any) -> None:
    """A Loader yields whole batches: a torch DataLoader with a batch_size (its default is 1; the HF Trainer passes
    per_device_train_batch_size) would stack several of them into [n, B, L] or fail on unequal lengths. Its fetcher is
    the caller of the first next(); say what to do instead."""
    code = getattr(caller, "f_code", None)
    if code is None or code.co_name != "fetch" or "torch" not in code.co_filename:
        return
    fetcher = caller.f_locals.get("self")
    if getattr(fetcher, "auto_collation", False):
        raise InvalidArgument(
            "gload.Loader yields whole batches (the server batches, pads and shards them); a DataLoader with a "
            "batch_size would stack several into one. Use DataLoader(loader, batch_size=None), or iterate the loader "
            "itself; with the Hugging Face Trainer use gload.hf.GloadTrainer(model=..., args=..., "
            "train_dataset=loader), a drop-in Trainer subclass")


# Channels and streams inherited by forked processes: kept referenced so that they are never finalised in a
# process whose gRPC threads they do not own.
def _weak_method(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` without a reference to its object: a stream's reader thread keeps the stream alive, and the stream
    must not keep its Loader alive, so that a Loader dropped without close() is collected and its __del__ ends the
    stream (the server frees its ring and connection)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any, **kwargs: Any) -> Any:
        m = ref()
        if m is None:
            raise GloadError("the Loader of this stream was garbage-collected")
        return m(*args, **kwargs)

    return call


_inherited: List[Any] = []
# shm: batches announced in the ring itself, slots returned through it (no message per batch), converted on the
# thread that calls next(); GLOAD_SHM_DOORBELL=0 asks for the message hand-off instead (to compare them:
# pyclient/bench/next_latency.py, bench/device.sh handoff). With device="cuda" the copy to the device is queued on a
# side stream and not waited for: the slot goes back once the copy's event has fired (queried on later calls).
_SHM_DOORBELL = os.environ.get("GLOAD_SHM_DOORBELL", "1") != "0"


def _runtime_fields() -> frozenset:
    """The fields that belong to the process that made them (never pickled): whatever _init_runtime and
    _reset_position set, read off a bare object so that the two cannot drift apart."""
    probe = object.__new__(Loader)
    Loader._init_runtime(probe)
    Loader._reset_position(probe)
    return frozenset(vars(probe))


_RUNTIME_FIELDS = _runtime_fields()
# Every Loader of this process, for the at-fork hooks.
_live: "weakref.WeakSet[Loader]" = weakref.WeakSet()


def _before_fork() -> None:
    if not _live:
        return
    for loader in list(_live):
        try:
            loader._park_before_fork()
        except Exception as e:  # noqa: BLE001 - a fork must not fail because a stream did not end cleanly
            log.warning("gload: parking %r before fork: %s", loader, e)
    # Closed calls and channels caught in reference cycles are collected now, in the parent, rather than by a
    # garbage collection in the child (where their gRPC threads do not exist).
    gc.collect()


def _after_fork_in_child() -> None:
    for loader in list(_live):
        loader._adopt_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _close_live_at_exit() -> None:
    """At a normal interpreter exit, before finalization stops gRPC's threads: ends every stream and channel this
    process opened (the server frees their rings now rather than when it notices the dropped connection). atexit
    handlers run before finalization, while gRPC's daemon threads still answer a channel's close."""
    for loader in list(_live):
        try:
            loader.close()
        except Exception as e:  # noqa: BLE001 - an exit must not fail because a stream did not end cleanly
            log.debug("gload: closing %r at exit: %s", loader, e)


atexit.register(_close_live_at_exit)

