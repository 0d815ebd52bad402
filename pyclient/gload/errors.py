"""Exceptions raised by the gload client.

Every exception derives from :class:`GloadError` and from the builtin exception a Python user would catch for that
kind of failure (``ConnectionError``, ``LookupError``, ``ValueError``, ``RuntimeError``), so existing handlers work.
A timeout in :meth:`gload.Loader.next` raises the builtin ``TimeoutError``.
"""

from __future__ import annotations

from typing import Optional

import grpc


class GloadError(Exception):
    """Base class of the client's errors."""


class ServerUnavailable(GloadError, ConnectionError):
    """The server cannot be reached, or went away and did not come back in time."""


class DatasetNotFound(GloadError, LookupError):
    """The server does not serve the dataset asked for; the message lists those it serves."""


class InvalidArgument(GloadError, ValueError):
    """The server refused an argument (batch policy, rank, worker, resume state ...); the message names the field."""


class DatasetChanged(GloadError, RuntimeError):
    """The dataset's fingerprint differs from the one a resume state was saved with: resuming would not continue
    the same plan."""


class Unauthenticated(GloadError, PermissionError):
    """The server wants a bearer token (``gload serve --auth-token-file``) and got none or a wrong one: pass
    ``auth_token=`` or set ``GLOAD_AUTH_TOKEN``."""


class ResourceExhausted(GloadError, RuntimeError):
    """A server-wide limit refused the stream (the message names it: ``--max-streams``, ``--max-buffer-bytes``,
    ``--max-streams-per-conn``); retry later or ask for less (prefetch, batch size)."""


class StreamError(GloadError, RuntimeError):
    """The server ended the batch stream with an error (data loss, internal error, ...)."""


class ProtocolError(GloadError, RuntimeError):
    """The server sent something the protocol does not allow (a client/server version mismatch, most likely)."""


def translate(err: grpc.RpcError, addr: str, what: str) -> GloadError:
    """Turns a gRPC error into the client's exception, naming the address and the operation ``what``."""
    code: Optional[grpc.StatusCode] = err.code() if hasattr(err, "code") else None
    detail = err.details() if hasattr(err, "details") else str(err)
    msg = f"{what} at {addr}: {detail}"
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServerUnavailable(f"gload server {addr} unreachable ({what}): {detail}")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return Unauthenticated(msg)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhausted(msg)
    if code == grpc.StatusCode.NOT_FOUND:
        return DatasetNotFound(msg)
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE):
        return InvalidArgument(msg)
    if code == grpc.StatusCode.FAILED_PRECONDITION and detail:
        if detail.startswith("resume.fingerprint"):
            return DatasetChanged(msg)
        if detail.startswith("resume."):
            return InvalidArgument(msg)
    return StreamError(f"{msg} ({code.name if code else 'unknown status'})")


class UntrustedServer(GloadError, PermissionError):
    """The address is served by another local user (not you, root, or a user named in ``$GLOAD_TRUST_SERVER``), or
    its socket lies where another user can replace it: nothing was sent to it. The message names the uid or the
    directory and the fix."""


class ForkUnsafe(GloadError, RuntimeError):
    """A forked process (a DataLoader worker under the fork start method) of one that had used gRPC, with a grpcio
    that cannot work there: use the spawn or forkserver start method, or a newer grpcio."""
