"""Per-step phase timings of a training loop, for ``gload doctor``.

``gload doctor -- python train.py`` runs the job while sampling the GPUs through NVML; this module gives it the
evidence NVML cannot: how each step's time splits between waiting for data, forward, backward, the optimizer step,
gradient sync and host work, how much of each batch is padding, and (when asked) a short ``torch.profiler`` window
summarised into kernels per step, the mean gap between kernels and the share of time in NCCL kernels::

    from gload.doctor import Doctor

    doc = Doctor()                 # writes to $GLOAD_DOCTOR_EVIDENCE (set by gload doctor); off when unset
    doc.watch(optimizer)           # optimizer.step() is timed as the "optimizer" phase (step hooks)
    doc.watch(model)               # forward, and backward from the output's gradient (optional)
    for batch in doc.iterate(loader):       # each next() starts a step; its wait is the "data" phase
        loss = model(batch)                 # (or: with doc.phase("forward"): ...)
        loss.backward()
        optimizer.step()
        with doc.phase("host"):
            log(loss.item())
        doc.tokens(mask)                    # real vs padded tokens (a 0/1 mask, or doc.tokens(real, total))
    doc.close()

Explicit steps work too: ``with doc.step(): with doc.phase("data"): ...``. Phases are ``data``, ``forward``,
``backward``, ``optimizer``, ``sync`` and ``host``; time inside a step outside any phase is ``other`` (host work the
loop did not name).

On CUDA every phase boundary records a CUDA event on the current stream; no host synchronisation is added. The
events of a step are read back a few steps later, once the GPU has passed them (``Event.query()``), so a phase's GPU
time is the time the GPU's stream spent between its boundaries: for ``data`` and ``host`` that is the time the GPU
waited for the host. Without CUDA the phases are timed on the host clock only.

Evidence is JSON lines appended to the file (one ``os.write`` per batch of whole lines, so ranks may share it):
a ``doctor`` record, then ``step`` records and at most one ``profile`` record per process. ``GLOAD_DOCTOR_PROFILE=
START:COUNT`` (or ``Doctor(profile=(START, COUNT))``) profiles COUNT steps from step START.

The module imports no torch at import time; torch is looked up when the first step starts. Evidence that cannot be
written is given up with one warning: the doctor never stops the training it watches.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import sys
import threading
import time
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

__all__ = ["Doctor", "PHASES", "ENV_EVIDENCE", "ENV_PROFILE", "summarize_kernels"]

ENV_EVIDENCE = "GLOAD_DOCTOR_EVIDENCE"
ENV_PROFILE = "GLOAD_DOCTOR_PROFILE"
PHASES = ("data", "forward", "backward", "optimizer", "sync", "host")
_OTHER = "other"
# Steps whose events the GPU has not passed yet: past this many, the oldest is waited for (the GPU would be this many
# steps behind the host, which the CUDA launch queue does not allow in practice).
_MAX_PENDING = 64
# Lines buffered before one write.
_FLUSH_LINES = 32
# Steps recorded at most (a bound on the evidence file: about 300 bytes a step).
_MAX_STEPS = 1_000_000


def _parse_profile(spec: Optional[str]) -> Optional[Tuple[int, int]]:
    if not spec:
        return None
    try:
        a, b = spec.split(":")
        start, count = int(a), int(b)
    except ValueError:
        raise ValueError(f"{ENV_PROFILE}={spec!r}: want START:COUNT (steps), e.g. 20:5") from None
    if start < 0 or not 0 < count <= 1000:
        raise ValueError(f"{ENV_PROFILE}={spec!r}: want START >= 0 and 1 <= COUNT <= 1000")
    return start, count


def summarize_kernels(kernels: List[Tuple[str, float, float]], steps: int) -> Dict[str, Any]:
    """Summarises GPU activities ``(name, start_us, end_us)`` of a profiled window of ``steps`` steps: kernels per
    step, GPU busy share (union of activities over their span), mean kernel time, mean gap between consecutive
    activities (overlaps count as no gap) and the share of busy time in NCCL kernels."""
    out: Dict[str, Any] = {"steps": steps, "kernels": len(kernels)}
    if not kernels or steps <= 0:
        return out
    ks = sorted(kernels, key=lambda k: k[1])
    busy = nccl = gaps = 0.0
    ngaps = 0
    cur_s, cur_e = ks[0][1], ks[0][2]
    for name, s, e in ks:
        if "nccl" in name.lower():
            nccl += max(e - s, 0.0)
        if s > cur_e:
            busy += cur_e - cur_s
            gaps += s - cur_e
            ngaps += 1
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    span = ks[-1][2] - ks[0][1] if len(ks) > 1 else ks[0][2] - ks[0][1]
    span = max(span, max(k[2] for k in ks) - ks[0][1])
    out.update(
        kernels_per_step=len(ks) / steps,
        span_ms=span / 1e3,
        busy_ms=busy / 1e3,
        busy_share=busy / span if span > 0 else 1.0,
        mean_kernel_us=sum(max(e - s, 0.0) for _, s, e in ks) / len(ks),
        mean_gap_us=gaps / len(ks),  # idle time per kernel launched
        nccl_share=min(nccl / busy, 1.0) if busy > 0 else 0.0,
    )
    return out


class _Step:
    __slots__ = ("index", "t0", "marks", "real", "total")

    def __init__(self, index: int):
        self.index = index
        self.t0 = time.time()
        # (phase name opened at this boundary, host perf_counter, CUDA event or None)
        self.marks: List[Tuple[str, float, Any]] = []
        self.real: List[Any] = []
        self.total = 0


class Doctor:
    """Times the phases of each training step and writes them as evidence for ``gload doctor``.

    ``path`` defaults to ``$GLOAD_DOCTOR_EVIDENCE``; without either the Doctor is off and every call costs a few
    attribute lookups. ``lag`` is how many steps to wait before reading a step's CUDA events back (they are read as
    soon as the GPU has passed them, never with a synchronisation unless more than 64 steps are pending).
    """

    def __init__(self, path: Optional[str] = None, *, profile: Optional[Tuple[int, int]] = None,
                 rank: Optional[int] = None, lag: int = 2, cuda: Optional[bool] = None):
        self.path = path if path is not None else os.environ.get(ENV_EVIDENCE, "")
        self.enabled = bool(self.path)
        self.profile = profile if profile is not None else _parse_profile(os.environ.get(ENV_PROFILE))
        self.rank = int(rank if rank is not None else os.environ.get("RANK", "0") or 0)
        self.lag = max(int(lag), 0)
        self._want_cuda = cuda
        self._lock = threading.RLock()
        self._torch: Any = None
        self._cuda = False
        self._fd: Optional[int] = None
        self._lines: List[str] = []
        self._pending: "collections.deque[_Step]" = collections.deque()
        self._cur: Optional[_Step] = None
        self._next_index = 0
        self._written = 0
        self._events: List[Any] = []  # pool of CUDA events
        self._prof: Any = None
        self._prof_started = -1
        self._hooks: List[Any] = []
        self._started = False
        self.closed = False

    # ---- setup -------------------------------------------------------------------------------------------------

    def _start(self) -> None:
        self._started = True
        torch = sys.modules.get("torch")
        if torch is None:
            try:
                import torch  # noqa: F811
            except ImportError:
                torch = None
        self._torch = torch
        cuda = torch is not None and torch.cuda.is_available()
        self._cuda = cuda if self._want_cuda is None else bool(self._want_cuda and cuda)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            self._give_up(f"cannot open the evidence file {self.path!r}: {e}")
            return
        head = {"kind": "doctor", "v": 1, "t_us": int(time.time() * 1e6), "rank": self.rank, "pid": os.getpid(),
                "cuda": self._cuda, "torch": getattr(torch, "__version__", None)}
        if self._cuda:
            try:
                head["device"] = torch.cuda.get_device_name(torch.cuda.current_device())
            except Exception:  # noqa: BLE001 - a name is a nicety
                pass
        self._lines.append(json.dumps(head))
        self._flush()
        atexit.register(self.close)  # a loop that never calls close() still leaves its last steps

    def _give_up(self, why: str) -> None:
        warnings.warn(f"gload.doctor: {why}; no more evidence is written", RuntimeWarning, stacklevel=3)
        self.enabled = False
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _flush(self) -> None:
        if not self._lines or self._fd is None:
            return
        data = ("\n".join(self._lines) + "\n").encode()
        self._lines = []
        try:
            while data:
                n = os.write(self._fd, data)
                data = data[n:]
        except OSError as e:
            self._give_up(f"writing {self.path!r}: {e}")

    # ---- hooks -------------------------------------------------------------------------------------------------

    def watch(self, obj: Any) -> Any:
        """Times ``obj``: an optimizer's ``step()`` as the ``optimizer`` phase (through its step pre/post hooks, or
        by wrapping ``step`` on torch < 2.0), a module's forward as ``forward`` and, from the gradient of its output
        on, ``backward`` (until the next phase starts). Returns ``obj``."""
        if not self.enabled:
            return obj
        if hasattr(obj, "param_groups") and callable(getattr(obj, "step", None)):
            if hasattr(obj, "register_step_pre_hook"):
                self._hooks.append(obj.register_step_pre_hook(lambda *a: self.mark("optimizer")))
                self._hooks.append(obj.register_step_post_hook(lambda *a: self.mark(_OTHER)))
            else:
                step = obj.step

                def timed_step(*a: Any, **kw: Any) -> Any:
                    self.mark("optimizer")
                    try:
                        return step(*a, **kw)
                    finally:
                        self.mark(_OTHER)

                obj.step = timed_step
            return obj
        if hasattr(obj, "register_forward_pre_hook"):
            def pre(*_: Any) -> None:
                self.mark("forward")

            def post(_m: Any, _inp: Any, out: Any) -> None:
                self.mark(_OTHER)
                for t in _tensors(out):
                    if getattr(t, "requires_grad", False):
                        t.register_hook(self._backward_hook)
                        break

            self._hooks.append(obj.register_forward_pre_hook(pre))
            self._hooks.append(obj.register_forward_hook(post))
            return obj
        raise TypeError(f"Doctor.watch: {type(obj).__name__} is neither an optimizer nor a module")

    def _backward_hook(self, grad: Any) -> None:
        self.mark("backward")
        return None

    # ---- steps and phases --------------------------------------------------------------------------------------

    def _event(self) -> Any:
        if not self._cuda:
            return None
        ev = self._events.pop() if self._events else self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def mark(self, phase: str) -> None:
        """Starts ``phase`` now in the open step (ending the phase before it); ``"other"`` for unnamed time.
        Outside a step it does nothing."""
        if not self.enabled:
            return
        with self._lock:
            s = self._cur
            if s is None or (s.marks and s.marks[-1][0] == phase):
                return
            s.marks.append((phase, time.perf_counter(), self._event()))

    def begin_step(self) -> None:
        """Opens a step (ending the open one, if any)."""
        if not self.enabled:
            return
        with self._lock:
            if not self._started:
                self._start()
                if not self.enabled:
                    return
            if self._cur is not None:
                self.end_step()
            if self._written + len(self._pending) >= _MAX_STEPS:
                return
            self._cur = _Step(self._next_index)
            self._next_index += 1
            if self.profile and self._cur.index == self.profile[0]:
                self._profile_start()
            self._cur.marks.append((_OTHER, time.perf_counter(), self._event()))

    def end_step(self) -> None:
        """Closes the open step; its timings are written once the GPU has passed it."""
        if not self.enabled:
            return
        with self._lock:
            s = self._cur
            if s is None:
                return
            s.marks.append(("", time.perf_counter(), self._event()))
            self._cur = None
            self._pending.append(s)
            if self._prof is not None and s.index >= self._prof_started + self.profile[1] - 1:
                self._profile_stop(s.index - self._prof_started + 1)
            self._drain(force=False)

    @contextlib.contextmanager
    def step(self) -> Iterator["Doctor"]:
        """A step, as a context manager."""
        self.begin_step()
        try:
            yield self
        finally:
            self.end_step()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block as phase ``name`` (one of PHASES) of the open step."""
        if name not in PHASES:
            raise ValueError(f"Doctor.phase: {name!r} is not one of {', '.join(PHASES)}")
        self.mark(name)
        try:
            yield
        finally:
            self.mark(_OTHER)

    def iterate(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Yields the batches of ``batches``; each ``next()`` ends the step before and opens one, timed as its
        ``data`` phase. The last step ends when the iteration does."""
        it = iter(batches)
        try:
            while True:
                self.begin_step()
                self.mark("data")
                try:
                    b = next(it)
                except StopIteration:
                    with self._lock:
                        self._cur = None  # the empty step of the failed next() is not a step
                    return
                self.mark(_OTHER)
                yield b
        finally:
            self.end_step()

    def tokens(self, real: Any, total: Optional[int] = None) -> None:
        """Counts the batch's tokens: ``tokens(mask)`` with a 0/1 attention mask (its sum is read when the step
        is read back, so no sync is added), or ``tokens(real, total)`` as numbers."""
        if not self.enabled:
            return
        with self._lock:
            s = self._cur
            if s is None:
                return
            if total is None:
                s.real.append(real.sum())
                s.total += int(real.numel())
            else:
                s.real.append(real)
                s.total += int(total)

    # ---- read-back ---------------------------------------------------------------------------------------------

    def _drain(self, force: bool) -> None:
        while self._pending:
            s = self._pending[0]
            ev = s.marks[-1][2]
            ready = len(self._pending) > self.lag and (ev is None or ev.query())
            if not ready and not force and len(self._pending) <= _MAX_PENDING:
                break
            if ev is not None and not ev.query():
                ev.synchronize()
            self._pending.popleft()
            self._write_step(s)
        if force or len(self._lines) >= _FLUSH_LINES:
            self._flush()

    def _write_step(self, s: _Step) -> None:
        phases: Dict[str, List[float]] = {}
        gpu_total: Optional[float] = 0.0 if self._cuda else None
        for (name, h0, e0), (_, h1, e1) in zip(s.marks, s.marks[1:]):
            host = (h1 - h0) * 1e3
            gpu = e0.elapsed_time(e1) if e0 is not None and e1 is not None else None
            cur = phases.setdefault(name, [0.0, 0.0])
            cur[0] += host
            if gpu is not None:
                cur[1] += gpu
                gpu_total += gpu  # type: ignore[operator]
        rec: Dict[str, Any] = {
            "kind": "step", "rank": self.rank, "step": s.index, "t_us": int(s.t0 * 1e6),
            "wall_ms": round((s.marks[-1][1] - s.marks[0][1]) * 1e3, 4),
            "gpu_ms": round(gpu_total, 4) if gpu_total is not None else None,
            "phases": {k: [round(v[0], 4), round(v[1], 4) if self._cuda else None] for k, v in phases.items()},
        }
        if s.real:
            rec["tokens"] = [int(sum(int(r) for r in s.real)), s.total]
        self._lines.append(json.dumps(rec))
        self._written += 1
        if self._cuda:
            self._events.extend(m[2] for m in s.marks if m[2] is not None)

    # ---- profiler ----------------------------------------------------------------------------------------------

    def _profile_start(self) -> None:
        torch = self._torch
        try:
            from torch.profiler import ProfilerActivity, profile
        except ImportError:
            self._lines.append(json.dumps({"kind": "profile", "rank": self.rank, "t_us": int(time.time() * 1e6),
                                           "error": "torch.profiler is not available"}))
            self.profile = None
            return
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self._cuda else [])
        self._prof = profile(activities=acts)
        self._prof.__enter__()
        self._prof_started = self._cur.index if self._cur else 0
        del torch

    def _profile_stop(self, steps: int) -> None:
        prof, self._prof = self._prof, None
        rec: Dict[str, Any] = {"kind": "profile", "rank": self.rank, "t_us": int(time.time() * 1e6)}
        try:
            prof.__exit__(None, None, None)
            kernels = []
            for e in prof.events():
                dt = getattr(e, "device_type", None)
                if dt is not None and getattr(dt, "name", str(dt)).upper().endswith("CUDA"):
                    tr = e.time_range
                    kernels.append((e.name, float(tr.start), float(tr.end)))
            rec.update(summarize_kernels(kernels, steps))
            if not kernels:
                rec["note"] = "no GPU kernels recorded" + ("" if self._cuda else " (no CUDA)")
        except Exception as e:  # noqa: BLE001 - the profile is optional evidence
            rec["error"] = f"{type(e).__name__}: {e}"
        self._lines.append(json.dumps(rec))
        self._flush()

    # ---- end ---------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Ends the open step, waits for the GPU to pass the pending ones, writes them and closes the file."""
        if self.closed:
            return
        with self._lock:
            self.closed = True
            if not self.enabled:
                return
            self.end_step()
            if self._prof is not None:
                self._profile_stop(max(self._next_index - self._prof_started, 1))
            self._drain(force=True)
            for h in self._hooks:
                with contextlib.suppress(Exception):
                    h.remove()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self.enabled = False

    def __enter__(self) -> "Doctor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _tensors(out: Any) -> Iterator[Any]:
    if hasattr(out, "register_hook"):
        yield out
    elif isinstance(out, (list, tuple)):
        for o in out:
            yield from _tensors(o)
    elif isinstance(out, dict):
        for o in out.values():
            yield from _tensors(o)
