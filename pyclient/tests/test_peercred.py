"""Other local users and hostile servers (issue 34 items 2 and 3): a socket another user bound first or can replace is
refused before anything is sent to it, and a ring the server names must be that server's own ring file.

Cross-user tests make a second user (``gloadtest``, with ``useradd`` when running as root) and run its side with the
system's python3 as that user; elsewhere they are skipped with the reason."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Iterator, List, Tuple

import grpc
import pytest

import gload
import gload.watch
from gload import _peercred
from gload._proto import gload_pb2 as pb
from gload._proto import gload_pb2_grpc as pb_grpc
from gload._ring import Ring

OTHER = "gloadtest"
RING_NAME = "gload-1-0-0123456789abcdef.ring"


def _other_user() -> Tuple[int, int]:
    if os.geteuid() != 0:
        pytest.skip(f"cross-user test skipped: it needs root to make a second user (running as uid {os.geteuid()})")
    try:
        pw = pwd.getpwnam(OTHER)
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER],
                           capture_output=True, text=True)
        try:
            pw = pwd.getpwnam(OTHER)
        except KeyError:
            pytest.skip(f"cross-user test skipped: cannot make user {OTHER}: useradd: {r.returncode} {r.stderr.strip()}")
    return pw.pw_uid, pw.pw_gid


_ATTACKER = r"""
import os, socket, sys, threading
path, mode = sys.argv[1], int(sys.argv[2], 8)
out = threading.Lock()  # connections end together; one whole line each
try:
    os.mkdir(os.path.dirname(path), 0o700); os.chmod(os.path.dirname(path), mode)
except FileExistsError:
    pass
s = socket.socket(socket.AF_UNIX); s.bind(path); os.chmod(path, 0o777); s.listen(64)
def serve(c):
    n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    with out:
        sys.stdout.write(f"got {n}\n"); sys.stdout.flush()
def loop():
    while True:
        c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=loop, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


class Attacker:
    """The other user binding ``path`` (making its directory with ``mode`` if missing) and counting received bytes."""

    def __init__(self, uid: int, gid: int, path: Path, mode: str = "755") -> None:
        py = shutil.which("python3", path="/usr/bin:/bin") or pytest.skip("no system python3 for the other user")
        self.proc = subprocess.Popen([py, "-c", _ATTACKER, str(path), mode], user=uid, group=gid, extra_groups=[],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        assert line == "ready", line

    def received(self, connections: int = 0) -> List[int]:
        """Bytes received on each connection, once stopped: first waits for the lines of ``connections`` closed
        connections (each ends with a line), as the listener exits as soon as its stdin closes."""
        lines = [self.proc.stdout.readline() for _ in range(connections)]
        self.proc.stdin.close()
        self.proc.stdin = None
        time.sleep(0.2)
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return [int(l.split()[1]) for l in lines + out.splitlines() if l.startswith("got ")]


@pytest.fixture
def sticky_tmp() -> Iterator[Path]:
    """A directory like /tmp: root's, mode 1777."""
    d = Path(tempfile.mkdtemp(prefix="gload-xuser-"))
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_default_socket_bound_by_another_user(gload_bin, datasets, sticky_tmp, monkeypatch):
    uid, gid = _other_user()
    monkeypatch.setattr(tempfile, "tempdir", str(sticky_tmp))
    monkeypatch.setenv("TMPDIR", str(sticky_tmp))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("GLOAD_ADDR", raising=False)
    sock = sticky_tmp / f"gload-{os.geteuid()}" / "gload.sock"
    assert gload.default_address() == f"unix://{sock}"
    atk = Attacker(uid, gid, sock)
    # Our server refuses to start there, naming the other user.
    r = subprocess.run([gload_bin, "serve", "--dataset", f"small={datasets.small}", "--no-gpu-watch"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert r.returncode != 0 and f"uid {uid}" in r.stderr, r.stderr
    # Our clients refuse it and send nothing.
    with pytest.raises(gload.UntrustedServer, match=f"uid {uid}"):
        with gload.Loader(None, "small", batch_size=16, return_tensors="np") as loader:
            next(iter(loader))
    with pytest.raises(gload.UntrustedServer):
        gload.watch.watch_report(None)
    r = subprocess.run([gload_bin, "watch", "--once"], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert r.returncode != 0 and "untrusted" in r.stderr, r.stderr
    assert all(n == 0 for n in atk.received())


def test_socket_directory_made_0777_by_another_user(gload_bin, datasets, sticky_tmp):
    uid, gid = _other_user()
    d = sticky_tmp / "gload-run"
    subprocess.run(["/bin/sh", "-c", f"mkdir {d} && chmod 777 {d}"], user=uid, group=gid, check=True)
    r = subprocess.run([gload_bin, "serve", "--dataset", f"small={datasets.small}", "--no-gpu-watch",
                        "--listen", f"unix://{d}/gload.sock"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "not private to you" in r.stderr, r.stderr
    assert not (d / "gload.sock").exists()


def test_socket_in_sticky_dir_bound_by_another_user(sticky_tmp):
    uid, gid = _other_user()
    sock = sticky_tmp / "gload-1234.sock"  # README's old Slurm recipe: /tmp/gload-$SLURM_JOB_ID.sock
    atk = Attacker(uid, gid, sock)
    with pytest.raises(gload.UntrustedServer, match=f"uid {uid}"):
        _peercred.check_server(f"unix://{sock}", _peercred.Trust())
    # Trusted explicitly, by name, uid or group: accepted.
    for spec in (OTHER, str(uid), f"group:{gid}"):
        assert _peercred.check_server(f"unix://{sock}", _peercred.parse_trust(spec)).uid == uid
    got = atk.received(connections=4)
    assert len(got) == 4 and all(n == 0 for n in got), f"four checks, four connections, nothing sent: {got}"


def test_symlinked_socket_directory(sticky_tmp):
    uid, gid = _other_user()
    theirs = sticky_tmp / "theirs"
    atk = Attacker(uid, gid, theirs / "gload.sock")
    link = sticky_tmp / f"gload-{os.geteuid()}"
    subprocess.run(["ln", "-s", str(theirs), str(link)], user=uid, group=gid, check=True)
    with pytest.raises(gload.UntrustedServer):
        _peercred.check_server(f"unix://{link}/gload.sock", _peercred.Trust())
    assert all(n == 0 for n in atk.received())


def test_path_checks(tmp_path):
    base = tmp_path / "b"
    base.mkdir(mode=0o700)
    for name, mode, ok in (("private", 0o700, True), ("open", 0o777, False), ("sticky", 0o1777, True),
                           ("group", 0o770, False)):
        (base / name).mkdir()
        os.chmod(base / name, mode)
        if ok:
            _peercred.check_path_dirs(str(base / name / "s.sock"))
        else:
            with pytest.raises(gload.UntrustedServer, match="mode"):
                _peercred.check_path_dirs(str(base / name / "s.sock"))
    os.symlink(base / "open", base / "link")
    with pytest.raises(gload.UntrustedServer):
        _peercred.check_path_dirs(str(base / "link" / "s.sock"))


def test_own_server_identified(server):
    p = _peercred.check_server(server.addr, _peercred.Trust())
    assert (p.uid, p.pid) == (os.geteuid(), server.pid)


# -- hostile rings --------------------------------------------------------------------------------------------------

SLOTS, SLOT = 2, 4096
SIZE = SLOTS * SLOT + 4096
SECRET = (b"victim's private data. " * (SIZE // 23 + 1))[:SIZE]


@pytest.fixture
def victim(tmp_path) -> Path:
    p = tmp_path / "private"
    p.write_bytes(SECRET)
    os.chmod(p, 0o600)
    return p


def _hostile_paths(tmp_path: Path, victim: Path) -> List[Tuple[str, str, int]]:
    out = [("any file", str(victim), os.geteuid()),
           ("relative", RING_NAME, os.geteuid()),
           ("dot dot", str(tmp_path / RING_NAME) + "/../private", os.geteuid())]
    d = tmp_path / "sym"
    d.mkdir()
    os.symlink(victim, d / RING_NAME)
    out.append(("symlink named like a ring", str(d / RING_NAME), os.geteuid()))
    d = tmp_path / "hard"
    d.mkdir()
    os.link(victim, d / RING_NAME)
    out.append(("hard link named like a ring", str(d / RING_NAME), os.geteuid()))
    d = tmp_path / "fifo"
    d.mkdir()
    os.mkfifo(d / RING_NAME)
    out.append(("fifo named like a ring", str(d / RING_NAME), os.geteuid()))
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o777)
    (d / RING_NAME).write_bytes(SECRET)
    out.append(("directory others can write", str(d / RING_NAME), os.geteuid()))
    os.symlink(tmp_path / "open", tmp_path / "dirlink")
    out.append(("symlinked directory", str(tmp_path / "dirlink" / RING_NAME), os.geteuid()))
    d = tmp_path / "own"
    d.mkdir(mode=0o700)
    (d / RING_NAME).write_bytes(SECRET)
    out.append(("server unknown", str(d / RING_NAME), -1))
    out.append(("another uid than the server's", str(d / RING_NAME), os.geteuid() + 4242))
    return out


def test_ring_refuses_hostile_paths(tmp_path, victim):
    for name, path, owner in _hostile_paths(tmp_path, victim):
        with pytest.raises((gload.ProtocolError, OSError)) as e:
            Ring(path, SLOTS, SLOT, SLOTS * SLOT, 4096, owner=owner).close()
        print(f"{name}: {e.value}")
        assert victim.read_bytes() == SECRET, name


class _HostileServicer(pb_grpc.LoaderServicer):
    """A server whose Opened names ``shm_path`` (whatever file it likes)."""

    def __init__(self, shm_path: str) -> None:
        self.shm_path = shm_path

    def Batches(self, request_iterator, context):  # noqa: N802 - gRPC's name
        next(request_iterator)
        yield pb.ServerMessage(opened=pb.Opened(
            batches=1, prefetch=SLOTS, slots=SLOTS, slot_bytes=SLOT, shm_path=self.shm_path,
            control_offset=SLOTS * SLOT, control_bytes=4096,
            layout=pb.SlotLayout(input_ids=0, lengths=2048, index=2560, position_ids=3072, cu_seqlens=3072,
                                 labels=3072)))
        time.sleep(5)


def _serve_hostile(sock: str, shm_path: str, ready) -> None:
    """The hostile server, in a process of its own: a gRPC server run inside the test process would make every
    fork-start test after it hang (grpc's fork support covers channels, not servers)."""
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_LoaderServicer_to_server(_HostileServicer(shm_path), srv)
    srv.add_insecure_port(f"unix://{sock}")
    srv.start()
    ready.set()
    srv.wait_for_termination()


def test_hostile_server_names_a_private_file(tmp_path, victim):
    """End to end: our own user's server (trusted by its peer credentials) names our private file as its ring."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    d = Path(tempfile.mkdtemp(prefix="gload-hostile-"))
    try:
        for name, path, owner in _hostile_paths(tmp_path, victim):
            if owner != os.geteuid():
                continue
            sock = d / f"s{abs(hash(name))}.sock"
            ready = ctx.Event()
            proc = ctx.Process(target=_serve_hostile, args=(str(sock), str(path), ready), daemon=True)
            proc.start()
            try:
                assert ready.wait(120), "the hostile server did not start"
                with pytest.raises(gload.GloadError) as e:
                    with gload.Loader(f"unix://{sock}", "d", batch_size=4, return_tensors="np",
                                      reconnect_timeout=1.0) as loader:
                        next(iter(loader))
                print(f"{name}: {e.value}")
                assert "ring" in str(e.value), (name, e.value)  # refused at Opened, not some later failure
                assert victim.read_bytes() == SECRET, name
            finally:
                proc.kill()
                proc.join()
    finally:
        shutil.rmtree(d, ignore_errors=True)
