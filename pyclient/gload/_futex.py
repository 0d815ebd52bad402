"""futex(2) on words of a shared-memory ring: sleeping until the server announces a batch, and waking a server that
sleeps until the client releases a slot (the protocol is in loader/shm/futex.go). Sleeps of ``time.sleep`` under a
millisecond last much longer than asked (timer slack, scheduler), a futex wakes in microseconds.

Linux only (x86-64 and arm64); elsewhere :data:`AVAILABLE` is False and callers poll. Nothing here touches memory other
than the word whose address it is given."""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys

_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower())
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _load() -> "ctypes._FuncPointer | None":
    if not sys.platform.startswith("linux") or _SYS_FUTEX is None:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    fn = libc.syscall  # a CDLL function: the GIL is released for the call
    fn.restype = ctypes.c_long
    return fn


_syscall = _load()
AVAILABLE = _syscall is not None


def sleep(addr: int, value: int, timeout_s: float) -> None:
    """Sleeps while the 32-bit word at ``addr`` holds ``value``, at most ``timeout_s`` seconds (a wake-up, a change
    of the word before the call, a signal and the timeout all return)."""
    assert _syscall is not None
    ts = _Timespec(int(timeout_s), int((timeout_s % 1.0) * 1e9))
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(addr), ctypes.c_int(_FUTEX_WAIT),
             ctypes.c_uint(value & 0xFFFFFFFF), ctypes.byref(ts), ctypes.c_void_p(0), ctypes.c_int(0))


def wake(addr: int) -> None:
    """Wakes every sleeper on the 32-bit word at ``addr``."""
    assert _syscall is not None
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(addr), ctypes.c_int(_FUTEX_WAKE), ctypes.c_int(2**31 - 1),
             ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_int(0))
