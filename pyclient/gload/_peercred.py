"""Who serves us: the client's checks that a gload server is run by the user (or root, or a user it was told to
trust) before it sends a byte, and that a shared-memory ring the server names is that server's own file.

The rules are loader/access's (Go) and are described in docs/security.md, "Other local users and hostile servers":

* a unix socket path must be one that only trusted users can change: every directory from ``/`` down belongs to the
  user, root or the server's (trusted) user and is writable by nobody else unless sticky (``/tmp``); a symbolic link on
  the way belongs to one of them too (:func:`check_path_dirs`); the socket file belongs to one of them
  (:func:`check_socket_file`);
* the process listening on it must be trusted: its SO_PEERCRED uid is the user's, root's, or one named in
  ``$GLOAD_TRUST_SERVER`` (``alice,1002,group:gload``), or its gid is a trusted group (:func:`check_server`);
* a loopback TCP server's uid is read from ``/proc/net/tcp{,6}`` (the socket at the other end of a probe connection);
* a ring must be named ``gload-PID-START-HEX.ring`` in ``/dev/shm`` or in a directory of the server's user that nobody
  else can write, and be a regular file with one link, belonging to the server's uid, of the announced size
  (:func:`open_ring`).

gRPC for Python cannot hand us its connection, so the unix-socket check is made on a probe connection of our own to
the same path, closed without sending anything. It is sound because the path is checked as well: only trusted users
can change what listens there, so the server gRPC reaches (now or on a reconnect) is one of theirs.
"""

from __future__ import annotations

import errno
import grp
import ipaddress
import os
import pwd
import socket
import stat
import struct
from typing import List, NamedTuple, Optional, Sequence, Tuple

from .errors import ProtocolError, UntrustedServer

ENV_TRUST = "GLOAD_TRUST_SERVER"
SHM_DIR = "/dev/shm"
_MAX_LINKS = 32
_PROBE_TIMEOUT_S = 10.0


class Peer(NamedTuple):
    """The server at the other end: uid, gid and pid (-1 where not known)."""

    uid: int
    gid: int
    pid: int


UNKNOWN = Peer(-1, -1, -1)


class Trust(NamedTuple):
    """Users (uids) and groups (gids) whose servers are accepted besides the user's own and root's."""

    uids: Tuple[int, ...] = ()
    gids: Tuple[int, ...] = ()

    def allows(self, uid: int, gid: int) -> bool:
        return uid in (os.geteuid(), 0) or uid in self.uids or (gid >= 0 and gid in self.gids)


def parse_trust(spec: Optional[str]) -> Trust:
    """``"alice,1002,group:gload,group:1003"`` (the form of ``$GLOAD_TRUST_SERVER``)."""
    uids: List[int] = []
    gids: List[int] = []
    for e in (spec or "").split(","):
        e = e.strip()
        if not e:
            continue
        try:
            if e.startswith("group:"):
                g = e[len("group:"):]
                gids.append(int(g) if g.isdigit() else grp.getgrnam(g).gr_gid)
            else:
                uids.append(int(e) if e.isdigit() else pwd.getpwnam(e).pw_uid)
        except KeyError:
            raise ValueError(f"${ENV_TRUST}: no such user or group {e!r}") from None
    return Trust(tuple(uids), tuple(gids))


def trust_from_env() -> Trust:
    return parse_trust(os.environ.get(ENV_TRUST))


def check_path_dirs(path: str, owners: Sequence[int] = ()) -> None:
    """Raises UntrustedServer unless nobody but root, the user and ``owners`` can change what ``path`` names (see the
    module's doc). A missing last element is fine (nothing to check yet)."""
    trusted = {0, os.geteuid(), *owners}

    def check(p: str, st: os.stat_result) -> None:
        if st.st_uid not in trusted:
            raise UntrustedServer(f"unsafe socket path: {p} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}) "
                                  "or root: another user can replace what is in it")
        if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UntrustedServer(f"unsafe socket path: {p} has mode {stat.S_IMODE(st.st_mode):04o}: others can write "
                                  f"to it and replace what is in it (chmod go-w {p})")

    todo = [c for c in os.path.abspath(path).split("/") if c]
    cur = "/"
    check(cur, os.lstat(cur))
    links = 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            if not todo:
                return
            raise
        if stat.S_ISLNK(st.st_mode):
            check(nxt, st)
            links += 1
            if links > _MAX_LINKS:
                raise UntrustedServer(f"unsafe socket path: {path}: more than {_MAX_LINKS} symbolic links")
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = "/"
            todo = [c for c in target.split("/") if c] + todo
            continue
        if todo or stat.S_ISDIR(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                raise UntrustedServer(f"unsafe socket path: {nxt} is not a directory")
            check(nxt, st)
        cur = nxt


def check_socket_file(path: str, owners: Sequence[int] = ()) -> None:
    """Raises UntrustedServer unless ``path`` is a unix socket of the user, root or ``owners`` in a directory only they
    can change (:func:`check_path_dirs`). FileNotFoundError if it is not there."""
    check_path_dirs(path, owners)
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise UntrustedServer(f"{path} is not a unix socket (mode {st.st_mode:#o})")
    if st.st_uid not in {0, os.geteuid(), *owners}:
        raise UntrustedServer(f"socket {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}): another user "
                              f"may have bound it first; set ${ENV_TRUST} to trust that user")


def peer_cred(sock: socket.socket) -> Peer:
    """SO_PEERCRED of a connected unix socket: the listening process's pid, uid and gid."""
    pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return Peer(uid, gid, pid)


def _proc_addr(host: str, port: int, v6: bool) -> str:
    ip = ipaddress.ip_address(host)
    if v6:
        if ip.version == 4:
            ip = ipaddress.IPv6Address("::ffff:" + str(ip))
        b = ip.packed
        words = b"".join(b[i:i + 4][::-1] for i in range(0, 16, 4))
    else:
        if ip.version != 4:
            return ""
        words = ip.packed[::-1]
    return f"{words.hex().upper()}:{port:04X}"


def tcp_peer(sock: socket.socket) -> Peer:
    """The uid owning the server's end of a loopback TCP connection (/proc/net/tcp{,6}); UNKNOWN if not listed."""
    local = sock.getsockname()[:2]
    remote = sock.getpeername()[:2]
    for path, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        want = f"{_proc_addr(remote[0], remote[1], v6)} {_proc_addr(local[0], local[1], v6)}"
        try:
            with open(path) as f:
                for n, line in enumerate(f):
                    if n > 1 << 20:
                        break
                    fs = line.split()
                    if len(fs) >= 8 and f"{fs[1]} {fs[2]}" == want:
                        return Peer(int(fs[7]), -1, -1)
        except (OSError, ValueError):
            continue
    return UNKNOWN


def _untrusted(addr: str, p: Peer) -> UntrustedServer:
    return UntrustedServer(
        f"{addr} is served by uid {p.uid} (pid {p.pid}), not by you (uid {os.geteuid()}): another user may have taken "
        f"the address; set ${ENV_TRUST} to trust that user")


def check_server(target: str, trust: Optional[Trust] = None, timeout: float = _PROBE_TIMEOUT_S) -> Peer:
    """Checks the server at ``target`` (``unix:///abs.sock``, ``unix:rel.sock`` or ``host:port``) before anything is
    sent to it, and returns who runs it (UNKNOWN when no server answers yet, or a TCP server the kernel does not list
    as local). Raises UntrustedServer for another user's server or a socket path another user can change."""
    trust = trust_from_env() if trust is None else trust
    if target.startswith("unix:"):
        path = target[len("unix://"):] if target.startswith("unix://") else target[len("unix:"):]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            try:
                s.connect(path)
            except (FileNotFoundError, ConnectionRefusedError, socket.timeout):
                # Nobody listens (yet): whoever will must be able to bind here, so the path must be safe now.
                check_path_dirs(path, trust.uids)
                try:
                    check_socket_file(path, trust.uids)
                except FileNotFoundError:
                    pass
                return UNKNOWN
            p = peer_cred(s)
        finally:
            s.close()  # nothing was sent
        if not trust.allows(p.uid, p.gid):
            raise _untrusted(target, p)
        try:
            check_socket_file(path, (p.uid, *trust.uids))
        except FileNotFoundError:
            raise UntrustedServer(f"socket {path} vanished while it was checked") from None
        return p
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    try:
        if not ipaddress.ip_address(host).is_loopback:
            return UNKNOWN
    except ValueError:
        if host != "localhost":
            return UNKNOWN
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError):
        return UNKNOWN
    try:
        p = tcp_peer(s)
    finally:
        s.close()
    if p.uid >= 0 and not trust.allows(p.uid, p.gid):
        raise _untrusted(target, p)
    return p


def check_ring_path(path: str, owner: int) -> None:
    """Raises ProtocolError unless ``path`` is a ring name (``gload-PID-START-HEX.ring``) in /dev/shm or in a directory
    (not a symbolic link) of ``owner`` that nobody else can write."""
    if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != path or "\0" in path:
        raise ProtocolError(f"ring path {path!r} is not an absolute, clean path")
    d, name = os.path.split(path)
    if not _ring_name(name):
        raise ProtocolError(f"ring path {path!r}: {name!r} is not a ring name (gload-PID-START-HEX.ring)")
    if d == SHM_DIR:
        return
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode):
        raise ProtocolError(f"ring directory {d} is not a directory (a symbolic link?)")
    if st.st_uid != owner or st.st_mode & 0o022:
        raise ProtocolError(f"ring directory {d} (uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}) is neither "
                            f"{SHM_DIR} nor a directory of the server's user (uid {owner}) that only it can write to")


def _ring_name(name: str) -> bool:
    if not (name.startswith("gload-") and name.endswith(".ring")):
        return False
    parts = name[len("gload-"):-len(".ring")].split("-")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit() or len(parts[2]) != 16:
        return False
    if not (parts[0].isascii() and parts[1].isascii()) or int(parts[0]) <= 0 or int(parts[0]) >= 1 << 31:
        return False
    return all(c in "0123456789abcdefABCDEF" for c in parts[2])


def open_ring(path: str, flags: int, owner: int, size: int, want: str) -> int:
    """Opens the ring ``path`` for mapping (a file descriptor) after :func:`check_ring_path`: without following a
    symbolic link or blocking on a FIFO; a regular file with one link, of uid ``owner``, of ``size`` bytes."""
    if owner < 0:
        raise ProtocolError(f"ring {path}: the server's user is unknown (a TCP connection the kernel does not list as "
                            "local), so its ring cannot be trusted: use transport='grpc'")
    check_ring_path(path, owner)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ProtocolError(f"ring {path} is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProtocolError(f"ring {path} is not a regular file (mode {st.st_mode:#o}), want a regular file of {want}")
        if st.st_size != size:
            raise ProtocolError(f"ring {path} has {st.st_size} bytes, the server announced {want}")
        if st.st_uid != owner:
            raise ProtocolError(f"ring {path} belongs to uid {st.st_uid}, not to the server's user (uid {owner}): "
                                "a server may only name its own ring")
        if st.st_nlink != 1:
            raise ProtocolError(f"ring {path} has {st.st_nlink} links, a ring has one")
    except BaseException:
        os.close(fd)
        raise
    return fd
