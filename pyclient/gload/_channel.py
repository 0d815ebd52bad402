"""Reaching a gload server: the default address (the user's private unix socket, as ``gload serve`` picks it), the
address check, and gRPC channels that send the bearer token of servers started with ``--auth-token-file``."""

from __future__ import annotations

import collections
import os
import stat
import tempfile
from typing import Any, Optional, Sequence, Tuple

import grpc

from ._peercred import Peer, Trust, check_server
from .errors import ForkUnsafe

ENV_ADDR = "GLOAD_ADDR"
ENV_TOKEN = "GLOAD_AUTH_TOKEN"
ENV_TOKEN_FILE = "GLOAD_AUTH_TOKEN_FILE"
_MIN_TOKEN = 16


def default_address() -> str:
    """Where ``gload serve`` listens without ``--listen``: ``$GLOAD_ADDR``, else ``unix://$XDG_RUNTIME_DIR/gload.sock``,
    else ``unix:///tmp/gload-<uid>/gload.sock`` (the same rule as the server's)."""
    addr = os.environ.get(ENV_ADDR)
    if addr:
        return addr
    run = os.environ.get("XDG_RUNTIME_DIR", "")
    if run and os.path.isabs(run):
        return "unix://" + os.path.join(run, "gload.sock")
    return "unix://" + os.path.join(tempfile.gettempdir(), f"gload-{os.getuid()}", "gload.sock")


def resolve(addr: Optional[str]) -> Tuple[str, str]:
    """(address, gRPC target) for ``addr``: unix:///path.sock, unix:rel/path.sock or host:port; None is
    :func:`default_address`."""
    if addr is None:
        addr = default_address()
    if not isinstance(addr, str) or not addr:
        raise ValueError(f"gload address {addr!r}: want 'unix:///path.sock' or 'host:port'")
    if addr.startswith("unix:"):
        if addr.startswith("unix://") and not addr.startswith("unix:///"):
            raise ValueError(f"gload address {addr!r}: unix:// needs an absolute path (unix:///path.sock)")
        return addr, addr
    if "://" in addr or ":" not in addr:
        raise ValueError(f"gload address {addr!r}: want 'unix:///path.sock' or 'host:port'")
    return addr, addr


def read_token_file(path: str) -> str:
    """The token in ``path`` (white space around it removed); the file must not be readable by group or others."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: a FIFO would block the open
        raise ValueError(f"auth token file {path}: not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)  # never waits for a FIFO's writer
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"auth token file {path}: not a regular file")
        if st.st_mode & 0o077:
            raise ValueError(f"auth token file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read it; "
                             f"chmod 600 {path}")
        tok = f.read(4097).decode("ascii", errors="replace").strip()
    return check_token(tok, f"auth token file {path}")


def check_token(tok: str, what: str = "auth_token") -> str:
    if not isinstance(tok, str):
        raise ValueError(f"{what}: want a string, got {type(tok).__name__}")
    if len(tok) < _MIN_TOKEN:
        raise ValueError(f"{what}: {len(tok)} characters, want at least {_MIN_TOKEN}")
    if any(not ("!" <= c <= "~") for c in tok):
        raise ValueError(f"{what}: want printable ASCII without spaces")
    return tok


def auth_token(explicit: Optional[str]) -> Optional[str]:
    """The token to send: ``explicit`` when given ("" sends none), else ``$GLOAD_AUTH_TOKEN``, else the content of
    ``$GLOAD_AUTH_TOKEN_FILE``, else None."""
    if explicit is not None:
        return check_token(explicit) if explicit else None
    env = os.environ.get(ENV_TOKEN, "").strip()
    if env:
        return env
    path = os.environ.get(ENV_TOKEN_FILE)
    if path:
        return read_token_file(path)
    return None


class _Details(collections.namedtuple("_Details", ("method", "timeout", "metadata", "credentials",
                                                    "wait_for_ready", "compression")),
               grpc.ClientCallDetails):
    pass


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
              grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call (plaintext is fine: unix sockets and loopback)."""

    def __init__(self, token: str) -> None:
        self._md = ("authorization", "Bearer " + token)

    def _details(self, d: Any) -> _Details:
        md = list(d.metadata or ())
        md.append(self._md)
        return _Details(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                        getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):  # type: ignore[no-untyped-def]
        return continuation(self._details(client_call_details), request_iterator)


# -- fork safety ----------------------------------------------------------------------------------------------------
#
# gRPC keeps process-wide state (threads, locks, pollers) from the first channel on. A process forked from one that
# had started gRPC inherits that state without its threads: grpcio >= 1.85 re-creates what it needs in the child
# (tested: pyclient/tests/test_process_safety.py, hundreds of forks with streams live in the parent), older grpcio
# aborts (abseil "Mutex::Fer", 1.51-1.62) or hangs at the first call (1.68-1.80; e.g. after a single failed
# connection attempt in the parent), with GRPC_ENABLE_FORK_SUPPORT=0 as with =1. gload therefore refuses, with a
# clear error and before touching gRPC, to open a channel in such a child with such a grpcio.

_FORK_SAFE_GRPC = (1, 85)
_started_in_pid: Optional[int] = None  # the process that opened a channel through open_channel
_started_by = ""  # what opened that process's first channel (e.g. "len(loader)"), for the child's error
_forked_from_grpc = False  # this process is a fork child of one that had started gRPC


def grpc_fork_safe(version: Optional[str] = None) -> bool:
    """Whether this grpcio (or ``version``) works in a process forked from one that had used it."""
    try:
        major, minor = (int(x) for x in (version or grpc.__version__).split(".")[:2])
    except ValueError:
        return True
    return (major, minor) >= _FORK_SAFE_GRPC


def _after_fork_in_child() -> None:
    global _forked_from_grpc
    if _started_in_pid is not None:
        _forked_from_grpc = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_fork_safe(what: str = "gload") -> None:
    """Raises ForkUnsafe in a fork child of a gRPC-using process when this grpcio cannot work there."""
    if _forked_from_grpc and not grpc_fork_safe():
        raise ForkUnsafe(
            f"{what}: this process (pid {os.getpid()}) was forked from one that had already talked to a gload server, "
            f"and grpcio {grpc.__version__} cannot be used after such a fork (it aborts or hangs in the child; "
            f"grpcio >= {'.'.join(map(str, _FORK_SAFE_GRPC))} can). "
            + (f"The parent first talked to it in {_started_by}; " if _started_by else "")
            + "len(loader), shapes(), plan(), progress(), datasets(), state_dict(batches=n) and iterating all do. "
            "Use DataLoader(..., multiprocessing_context='spawn' or 'forkserver'), upgrade grpcio, or do not use "
            "the Loader in the parent before its workers start")


def open_channel(target: str, token: Optional[str], options: Sequence[Tuple[str, Any]] = (),
                 by: str = "") -> grpc.Channel:
    """A plaintext channel to ``target`` that sends ``token`` (None: no token) with every call, once the server was
    checked (:func:`open_checked_channel`; ``by``: what needs it, named to a fork child that may not use gRPC)."""
    return open_checked_channel(target, token, options, by=by)[0]


def open_checked_channel(target: str, token: Optional[str], options: Sequence[Tuple[str, Any]] = (),
                         trust: Optional[Trust] = None, by: str = "") -> Tuple[grpc.Channel, Peer]:
    """(channel, server): :func:`gload._peercred.check_server` first (UntrustedServer for another user's server or a
    socket path another user can change; nothing is sent to it), then a plaintext channel to ``target`` that sends
    ``token`` (None: no token) with every call. ``server`` is who runs it (uid -1 if not known yet). ``by`` names
    what needs the channel, for the error a fork child that may not use gRPC gets."""
    global _started_in_pid, _started_by
    check_fork_safe(f"channel to {target}")
    peer = check_server(target, trust)
    if _started_in_pid != os.getpid() or (by and not _started_by):
        _started_by = by
    _started_in_pid = os.getpid()
    ch = grpc.insecure_channel(target, options=list(options))
    if token:
        ch = grpc.intercept_channel(ch, _Bearer(token))
    return ch, peer
