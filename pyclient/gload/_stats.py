"""Client-side timing of the training loop, for the starvation report: how long ``next()`` took (and how much of it
was waiting for data), and how long the steps between calls took."""

from __future__ import annotations

import collections
import time
from typing import Deque, Dict, Optional


class Stats:
    """Accumulates per-step timings. ``window`` bounds the samples kept for percentiles."""

    def __init__(self, window: int = 10000) -> None:
        self.steps = 0
        self.wait_s = 0.0  # time next() waited for a batch
        self.step_s = 0.0  # time between a next() returning and the following call
        self.next_s = 0.0  # time inside next()
        self.reconnects = 0
        self.started = time.monotonic()
        self._lat: Deque[float] = collections.deque(maxlen=window)
        self._returned: Optional[float] = None

    def begin(self) -> "tuple[float, float]":
        """Called when next() is entered: returns (t0, step seconds since the previous return)."""
        t0 = time.perf_counter()
        step = 0.0 if self._returned is None else t0 - self._returned
        return t0, step

    def end(self, t0: float, waited: float, step: float) -> None:
        """Called when next() returns a batch."""
        t1 = time.perf_counter()
        self.steps += 1
        self.wait_s += waited
        self.step_s += step
        self.next_s += t1 - t0
        self._lat.append(t1 - t0)
        self._returned = t1

    def reset_step_clock(self) -> None:
        """Forget the previous return (a new epoch: the time in between is not a step)."""
        self._returned = None

    def percentiles(self) -> Dict[str, float]:
        """p50 and p99 of next() latency over the window, in seconds."""
        if not self._lat:
            return {"p50": 0.0, "p99": 0.0}
        s = sorted(self._lat)
        return {"p50": s[len(s) // 2], "p99": s[min(len(s) - 1, len(s) * 99 // 100)]}

    def summary(self) -> Dict[str, float]:
        """Totals and percentiles (seconds, shares in [0, 1])."""
        p = self.percentiles()
        busy = self.wait_s + self.step_s
        return {
            "steps": self.steps,
            "wait_s": self.wait_s,
            "step_s": self.step_s,
            "wait_share": self.wait_s / busy if busy > 0 else 0.0,
            "next_p50_s": p["p50"],
            "next_p99_s": p["p99"],
            "mean_step_s": self.step_s / max(self.steps - 1, 1),
            "reconnects": self.reconnects,
        }
