"""Reaching a gload server: the default address (the user's private unix socket, as ``gload serve`` picks it), the
address check, and gRPC channels that send the bearer token of servers started with ``--auth-token-file``."""

from __future__ import annotations

import collections
import os
import stat
import tempfile
from typing import Any, Optional, Sequence, Tuple

import grpc

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
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"auth token file {path}: not a regular file")
    if st.st_mode & 0o077:
        raise ValueError(f"auth token file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read it; chmod 600 {path}")
    with open(path, "rb") as f:
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


def open_channel(target: str, token: Optional[str], options: Sequence[Tuple[str, Any]] = ()) -> grpc.Channel:
    """A plaintext channel to ``target`` that sends ``token`` (None: no token) with every call."""
    ch = grpc.insecure_channel(target, options=list(options))
    if token:
        ch = grpc.intercept_channel(ch, _Bearer(token))
    return ch
