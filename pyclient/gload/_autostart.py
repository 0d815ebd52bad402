"""This node's gload server for this user and job: found, or started from the gload binary, by a Loader given a
dataset path (``Loader("data/wiki", ...)``).

One server per (user, job) serves every local rank and DataLoader worker of the job. Its files live in the user's
private socket directory (the directory of the default socket: ``$XDG_RUNTIME_DIR``, else ``/tmp/gload-<uid>``,
mode 0700)::

    gload-job-<job>.sock   the server's socket (mode 0600)
    gload-job-<job>.lock   the start lock: whoever holds it (flock) checks for a live server and starts one if none
                           answers; the server takes it too before an idle exit, so a client attaching never races
                           the exit; the server removes it when it exits
    gload-job-<job>.log    the server's log (appended; kept after it exits, for the post-mortem; moved to
                           gload-job-<job>.log.1 past 16 MiB; the logs of other jobs whose server is gone are
                           removed after 7 days, when a server is started)

``<job>`` is ``$GLOAD_JOB``, else Slurm's job id, else torchrun's run id and master port, else this process group
(a training script and its DataLoader workers share one; two scripts started from a shell do not).

The server exits ``idle_exit`` seconds after its last client connection closed, and at once when the process that
started it (the training process: a DataLoader worker names its parent) has exited and no client is left; it leaves
no socket, ring or lock behind. Its settings come from :func:`configure_server` or ``GLOAD_SERVER_<SETTING>``
environment variables (``GLOAD_SERVER_IDLE_EXIT=120``, ``GLOAD_SERVER_MAX_PREFETCH=32``); they apply when this
process starts the server (a running one keeps its own, and the Loader says which it attached to).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import math
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import grpc

from ._binary import BinaryNotFound, find as find_binary
from ._proto import gload_pb2 as pb
from ._proto import gload_pb2_grpc as pb_grpc
from .errors import GloadError, ServerUnavailable, translate

ENV_PREFIX = "GLOAD_SERVER_"
ENV_JOB = "GLOAD_JOB"

# Settings of the server (name: (kind, default)); each is gload serve's flag of the same name with dashes.
_DURATION, _INT, _STR, _BOOL = "duration", "int", "str", "bool"
SERVER_SETTINGS: Dict[str, Tuple[str, Any]] = {
    "idle_exit": (_DURATION, 60.0),
    "max_prefetch": (_INT, None),
    "default_prefetch": (_INT, None),
    "max_streams": (_INT, None),
    "max_streams_per_conn": (_INT, None),
    "max_conns": (_INT, None),
    "max_buffer_bytes": (_INT, None),
    "max_batch_bytes": (_INT, None),
    "plan_cache": (_INT, None),
    "drain_timeout": (_DURATION, None),
    "metrics": (_STR, None),
    "auth_token_file": (_STR, None),
    "index_dir": (_STR, None),
    "no_write_index": (_BOOL, None),
    "verify": (_BOOL, None),
    "no_gpu_watch": (_BOOL, None),
    "watch_interval": (_DURATION, None),
    "watch_window": (_DURATION, None),
    "cache": (_STR, None),
    "cache_size": (_STR, None),
    "cache_ahead": (_INT, None),
    "cache_fetch": (_INT, None),
    "s3_endpoint": (_STR, None),
    "s3_region": (_STR, None),
    "s3_profile": (_STR, None),
    "log_level": (_STR, None),
}
# Settings of the start itself (not flags).
CLIENT_SETTINGS: Dict[str, Tuple[str, Any]] = {
    "start_timeout": (_DURATION, 60.0),  # from taking the lock to the server answering
    "job": (_STR, None),  # overrides the job key
    "args": (_STR, None),  # more gload serve flags, one shell-quoted string
}
_LOG_TAIL = 30


class ServerStartError(ServerUnavailable):
    """The Loader could not start (or reach) its node's server; the message gives the reason, the log's path and
    its last lines."""


def _check_value(name: str, value: Any) -> str:
    """The environment form of a setting's value; raises ValueError naming the setting."""
    kind = (SERVER_SETTINGS.get(name) or CLIENT_SETTINGS[name])[0]
    if kind == _DURATION:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"gload server setting {name}={value!r}: want seconds (a number >= 0)")
        return repr(float(value))
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"gload server setting {name}={value!r}: want an integer >= 0")
        return str(value)
    if kind == _BOOL:
        if value not in (True, False):
            raise ValueError(f"gload server setting {name}={value!r}: want True or False")
        return "1" if value else "0"
    if name == "args" and isinstance(value, (list, tuple)):
        value = " ".join(shlex.quote(str(a)) for a in value)
    if not isinstance(value, str) or "\x00" in value:
        raise ValueError(f"gload server setting {name}={value!r}: want a string")
    return value


def configure_server(**settings: Any) -> Dict[str, Any]:
    """Sets the settings of the server a Loader given a dataset path starts on this node (names as ``gload serve``'s
    flags with underscores: ``idle_exit`` seconds, ``max_prefetch``, ``max_buffer_bytes``, ``max_streams``,
    ``plan_cache``, ``metrics`` ("127.0.0.1:9400"), ``auth_token_file``, ``cache``/``cache_size`` for s3:// datasets,
    ``no_gpu_watch`` ...; ``start_timeout`` seconds, ``job`` (the job key), ``args`` (more flags)). None unsets one.

    They are kept as ``GLOAD_SERVER_<NAME>`` environment variables, so DataLoader workers and other processes this
    one starts see them too. They apply when a server is started; one already running keeps its own. Returns every
    setting in force."""
    for name, value in settings.items():
        if name not in SERVER_SETTINGS and name not in CLIENT_SETTINGS:
            raise ValueError(f"gload.configure_server: unknown setting {name!r}; known: "
                             + ", ".join(sorted({**SERVER_SETTINGS, **CLIENT_SETTINGS})))
        key = ENV_PREFIX + name.upper()
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = _check_value(name, value)
    return current_settings()


def current_settings() -> Dict[str, Any]:
    """The settings in force (environment, else defaults); raises ValueError for a malformed variable."""
    out: Dict[str, Any] = {}
    for name, (kind, default) in {**SERVER_SETTINGS, **CLIENT_SETTINGS}.items():
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is None or raw == "":
            out[name] = default
            continue
        try:
            if kind == _DURATION:
                v: Any = float(raw)
                if not math.isfinite(v) or v < 0:
                    raise ValueError
            elif kind == _INT:
                v = int(raw)
                if v < 0:
                    raise ValueError
            elif kind == _BOOL:
                if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                    raise ValueError
                v = raw.lower() in ("1", "true", "yes")
            else:
                v = raw
        except ValueError:
            raise ValueError(f"${ENV_PREFIX}{name.upper()}={raw!r}: want {kind}") from None
        out[name] = v
    return out


def _duration(s: float) -> str:
    return f"{int(round(s * 1000))}ms"


def server_args(settings: Mapping[str, Any]) -> List[str]:
    """gload serve's flags for ``settings`` (lifetime flags aside)."""
    args: List[str] = []
    for name, (kind, _) in SERVER_SETTINGS.items():
        v = settings.get(name)
        if v is None or name == "idle_exit":
            continue
        flag = "--" + name.replace("_", "-")
        if kind == _BOOL:
            if v:
                args.append(flag)
        elif kind == _DURATION:
            args += [flag, _duration(v)]
        else:
            args += [flag, str(v)]
    if settings.get("args"):
        args += shlex.split(settings["args"])
    return args


# -- where ------------------------------------------------------------------------------------------------------------


def job_key(settings: Optional[Mapping[str, Any]] = None) -> str:
    """The job this process belongs to (see the module's doc), as a file-name-safe key."""
    raw = (settings or {}).get("job") or os.environ.get(ENV_JOB)
    if not raw and os.environ.get("SLURM_JOB_ID"):
        raw = "slurm" + os.environ["SLURM_JOB_ID"]
    if not raw and os.environ.get("TORCHELASTIC_RUN_ID"):
        raw = f"torchrun{os.environ['TORCHELASTIC_RUN_ID']}-{os.environ.get('MASTER_PORT', '')}"
    if not raw:
        raw = f"pg{os.getpgrp()}"
    key = re.sub(r"[^A-Za-z0-9._-]", "_", raw).lstrip(".")
    if len(key) > 40 or not key:
        key = key[:24] + "-" + hashlib.sha256(raw.encode()).hexdigest()[:12]
    return key


def run_dir() -> str:
    """The user's private directory of gload sockets (the default socket's, whatever $GLOAD_ADDR says), created
    with mode 0700 if missing; refused when another user owns it or others can enter it."""
    run = os.environ.get("XDG_RUNTIME_DIR", "")
    if run and os.path.isabs(run) and os.path.isdir(run):
        d = run
    else:
        d = os.path.join(tempfile.gettempdir(), f"gload-{os.getuid()}")
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise ServerStartError(f"gload: {d} is not a directory of user {os.getuid()}: refusing to put the server's "
                               "socket there (remove it, or set XDG_RUNTIME_DIR to a private directory)")
    if st.st_mode & 0o077 and d != run:
        raise ServerStartError(f"gload: {d} has mode {stat.S_IMODE(st.st_mode):04o}: others can enter it; "
                               f"chmod 700 {d}")
    return d


@dataclass(frozen=True)
class Paths:
    sock: str
    lock: str
    log: str

    @property
    def addr(self) -> str:
        return "unix://" + self.sock


def paths(settings: Optional[Mapping[str, Any]] = None) -> Paths:
    base = os.path.join(run_dir(), "gload-job-" + job_key(settings))
    return Paths(base + ".sock", base + ".lock", base + ".log")


def _owner_pid() -> int:
    """The process whose exit ends the server: this one, or the training process a DataLoader worker serves."""
    tud = sys.modules.get("torch.utils.data")
    try:
        if tud is not None and tud.get_worker_info() is not None:
            return os.getppid()
    except Exception:  # noqa: BLE001 - an odd torch: this process, then
        pass
    return os.getpid()


# -- the lock ---------------------------------------------------------------------------------------------------------


class _StartLock:
    """flock on the lock file, waited for until ``deadline`` (never longer); a file removed (by an exiting server)
    after we opened it is reopened, so two processes never hold locks on two different files of one path."""

    def __init__(self, path: str, deadline: float) -> None:
        self.path, self.deadline, self.fd = path, deadline, -1

    def __enter__(self) -> "_StartLock":
        pause = 0.005
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as e:
                        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                            raise
                    if time.monotonic() > self.deadline:
                        raise ServerStartError(f"gload: the server start lock {self.path} stayed taken until the start "
                                               "timeout (another process is starting the server, or hangs holding it)")
                    time.sleep(pause)
                    pause = min(2 * pause, 0.1)
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(self.path))
                except FileNotFoundError:
                    same = False
                if same:
                    self.fd, fd = fd, -1
                    return self
            finally:
                if fd >= 0:
                    os.close(fd)

    def remove(self) -> None:
        """Removes the lock file while holding it (whoever waits for it then sees it gone and reopens)."""
        try:
            if os.path.samestat(os.fstat(self.fd), os.stat(self.path)):
                os.unlink(self.path)
        except OSError:
            pass

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)  # releases the lock
        self.fd = -1


# -- finding and starting ----------------------------------------------------------------------------------------------


@dataclass
class Server:
    """A server this process attached to (or started): picklable, so DataLoader workers carry it."""
    addr: str
    log: str
    lock: str
    started: bool  # by this process
    pid: Optional[int]  # when started here
    binary: str
    job: str

    def describe(self) -> str:
        how = f"started by this process (pid {self.pid}, {self.binary})" if self.started else "already running"
        return f"node server of job {self.job} at {self.addr}, {how}; log {self.log}"


_children: List[subprocess.Popen] = []  # started here; reaped by a thread so none stays a zombie


def _ping(addr: str, timeout: float) -> bool:
    """Whether a server listens at ``addr``. A plain connect, not an RPC: a Loader is made before DataLoader workers
    fork, and gRPC must not have run in a process that forks (gload._channel, fork safety). The socket is in the
    user's private directory, so only the user's own processes can listen there, and a gload server listens only
    once it is ready to serve."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(addr[len("unix://"):])
            return True
    except OSError:
        return False


def _tail(path: str, n: int = _LOG_TAIL) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            lines = f.read().decode("utf-8", errors="replace").splitlines()[-n:]
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join("    " + ln for ln in lines) or "    (empty)"


# Log housekeeping when a server starts: its own log is moved aside past _LOG_ROTATE_BYTES (one older copy kept),
# and logs of other jobs, untouched for _LOG_KEEP_SECONDS and with no lock (no server: it removes its lock when it
# exits), are removed, at most _LOG_PRUNE_MAX per start.
_LOG_ROTATE_BYTES = 16 << 20
_LOG_KEEP_SECONDS = 7 * 86400
_LOG_PRUNE_MAX = 1000
_JOB_LOG = re.compile(r"gload-job-.+\.log(\.1)?")


def _tidy_logs(p: Paths) -> None:
    try:
        if os.lstat(p.log).st_size > _LOG_ROTATE_BYTES:
            os.replace(p.log, p.log + ".1")
    except OSError:
        pass
    d = os.path.dirname(p.log)
    now = time.time()
    removed = 0
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if removed >= _LOG_PRUNE_MAX or not _JOB_LOG.fullmatch(name):
            continue
        path = os.path.join(d, name)
        if path in (p.log, p.log + ".1"):
            continue
        lock = os.path.join(d, name.removesuffix(".1").removesuffix(".log") + ".lock")
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < _LOG_KEEP_SECONDS or os.path.lexists(lock):
                continue
            os.unlink(path)
            removed += 1
        except OSError:
            continue


def _spawn(p: Paths, settings: Mapping[str, Any], binary: str) -> subprocess.Popen:
    _tidy_logs(p)
    args = [binary, "serve", "--paths-only", "--listen", p.addr, "--lock-file", p.lock,
            "--owner-pid", str(_owner_pid()), "--idle-exit", _duration(settings["idle_exit"])] + server_args(settings)
    fd = os.open(p.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (f"--- {time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid {os.getpid()} starts: "
                      f"{' '.join(shlex.quote(a) for a in args)}\n").encode())
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, close_fds=True,
                                start_new_session=True)
    except OSError as e:
        raise ServerStartError(f"gload: cannot run {binary}: {e}") from None
    finally:
        os.close(fd)
    return proc


def ensure_server() -> Server:
    """Finds this node's server for this user and job, or starts one; raises ServerStartError (with the log's
    tail) when it cannot, after at most the start timeout: never hangs."""
    settings = current_settings()
    p = paths(settings)
    job = job_key(settings)
    deadline = time.monotonic() + settings["start_timeout"]
    try:
        binary, _ = find_binary()
    except BinaryNotFound as e:
        binary, why_no_binary = "", str(e)
    else:
        why_no_binary = ""
    with _StartLock(p.lock, deadline) as lock:
        if _ping(p.addr, timeout=max(1.0, min(10.0, deadline - time.monotonic()))):
            return Server(addr=p.addr, log=p.log, lock=p.lock, started=False, pid=None, binary=binary, job=job)
        try:
            return _start(p, settings, binary, why_no_binary, job, deadline)
        except ServerStartError:
            lock.remove()  # nothing runs: leave no lock behind (removed while held, as the server does)
            raise


def _start(p: Paths, settings: Mapping[str, Any], binary: str, why_no_binary: str, job: str, deadline: float
           ) -> Server:
    if not binary:
        raise ServerStartError(f"gload: no server of job {job} at {p.addr} and none can be started: {why_no_binary}")
    proc = _spawn(p, settings, binary)
    pause = 0.02
    while True:
        code = proc.poll()
        if code is not None:
            raise ServerStartError(f"gload: the server ({binary} serve) exited with status {code} before it "
                                   f"answered at {p.addr}; its log {p.log} ends:\n{_tail(p.log)}")
        if _ping(p.addr, timeout=1.0):
            # Reaped by a thread once it exits, so that it never stays a zombie of this process (not before: a
            # thread in wait() would keep poll() above from seeing an early exit).
            _children.append(proc)
            threading.Thread(target=proc.wait, name=f"gload-server-{proc.pid}-reaper", daemon=True).start()
            return Server(addr=p.addr, log=p.log, lock=p.lock, started=True, pid=proc.pid, binary=binary, job=job)
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise ServerStartError(f"gload: the server ({binary} serve, pid {proc.pid}) did not answer at "
                                   f"{p.addr} within {settings['start_timeout']:g} s (start_timeout); it was "
                                   f"killed; its log {p.log} ends:\n{_tail(p.log)}")
        time.sleep(pause)
        pause = min(2 * pause, 0.2)


def open_paths(stub: pb_grpc.LoaderStub, addr: str, paths_: List[str], timeout: float) -> Dict[str, str]:
    """Registers dataset paths with the server behind ``stub`` (OpenPath); returns {path: the name it serves it
    by}."""
    out: Dict[str, str] = {}
    for path in paths_:
        try:
            r = stub.OpenPath(pb.OpenPathRequest(path=path), timeout=timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise GloadError(f"gload server {addr} is older than this client: it cannot open datasets by path "
                                 "(no OpenPath RPC); name a dataset it serves instead") from None
            raise translate(e, addr, f"open dataset {path}") from None
        out[path] = r.dataset.name
    return out


# -- the Loader's arguments ------------------------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def is_path(s: str) -> bool:
    """Whether a dataset argument is a path (or s3:// URL) rather than the name of a dataset a server serves."""
    return s.startswith("s3://") or "/" in s or s.startswith(("~", "."))


def absolute(s: str) -> str:
    """A dataset path as the server takes it: an s3:// URL as is, else an existing directory made absolute."""
    if s.startswith("s3://"):
        return s
    p = os.path.abspath(os.path.expanduser(s))
    if not os.path.isdir(p):
        what = "does not exist" if not os.path.exists(p) else "is not a directory"
        raise FileNotFoundError(f"gload: dataset path {s!r} ({p}) {what}: want a directory written by gload tokenize "
                                "or save_to_disk, or s3://bucket/prefix")
    if not os.path.exists(os.path.join(p, "state.json")):
        hint = ("a gload tokenize run into it was interrupted or is still running (its journal gload.progress.json "
                "is there): run the same command with --resume" if os.path.exists(os.path.join(p, "gload.progress.json"))
                else "make one with gload tokenize --out DIR (or datasets' save_to_disk); a DatasetDict's splits are "
                "its subdirectories")
        raise FileNotFoundError(f"gload: dataset path {s!r} ({p}) is not a dataset (no state.json): {hint}")
    return p


def split_args(addr: Any, dataset: Any) -> Tuple[Optional[str], Any, List[str]]:
    """Reads Loader's first two arguments: (address or None, dataset as a name, path or mapping, the dataset paths
    among them, made absolute). ``Loader("data/wiki")``: one argument is a dataset (path, or mapping of paths)."""
    if dataset is None:
        if addr is None:
            raise ValueError("dataset: a directory (Loader('data/wiki')), an s3:// URL, or a server's dataset name "
                             "with its address is required")
        addr, dataset = None, addr
        if isinstance(dataset, str) and dataset.startswith("unix:"):
            raise ValueError(f"Loader({dataset!r}): a server address needs a dataset name too: "
                             f"Loader({dataset!r}, 'wiki'); or give a dataset directory alone")
        if isinstance(dataset, str) and dataset and not is_path(dataset):
            dataset = "./" + dataset  # Loader("wiki"): the directory wiki
    if not isinstance(dataset, (str, Mapping)):
        raise ValueError(f"dataset {dataset!r}: want a directory, an s3:// URL, a dataset name or a mapping of them to "
                         "weights (pass batch_size and the rest by keyword)")
    found: List[str] = []
    if not dataset:
        return addr, dataset, found  # Loader's own check says what is missing
    if isinstance(dataset, str):
        if is_path(dataset):
            found.append(absolute(dataset))
            dataset = found[-1]
    else:
        out = {}
        for k, w in dataset.items():
            if isinstance(k, str) and is_path(k):
                found.append(absolute(k))
                k = found[-1]
            out[k] = w
        dataset = out
    return addr, dataset, found


def rename(dataset: Any, names: Mapping[str, str]) -> Any:
    """``dataset`` with its paths replaced by the names the server serves them by."""
    if isinstance(dataset, str):
        return names.get(dataset, dataset)
    return {names.get(k, k): w for k, w in dataset.items()}


def attach(addr: Optional[str]) -> Tuple[str, Optional[Server]]:
    """Where a Loader of dataset paths streams from: the explicit ``addr`` (or $GLOAD_ADDR), else this node's job
    server, found or started."""
    if addr is not None or os.environ.get("GLOAD_ADDR"):
        return addr or os.environ["GLOAD_ADDR"], None
    server = ensure_server()
    return server.addr, server
