#!/usr/bin/env python3
"""The docs test: runs the code blocks of README.md and docs/*.md that are marked runnable, and checks that every
`gload` command line in any code block names a subcommand and flags that exist.

A block is runnable when the line before its opening fence (blank lines between are allowed) is
``<!-- runnable -->``, or when its info string has the word ``runnable`` (```` ```sh runnable ````). Languages:
sh/bash/shell (run by ``bash -euo pipefail``) and python (run by --python). Mark only blocks that run in seconds on a
2-core machine without a GPU, a bucket or a cluster.

Blocks run in order — README.md first, then docs/tokenizing.md (which makes the datasets later pages use), then the
other pages in name order — in one temporary directory holding a link to the repository's examples/, with the
binary under test first on PATH as ``gload``, the repository's pyclient first on PYTHONPATH, and GLOAD_ADDR and
XDG_CACHE_HOME inside the temporary directory (so a server started by one block is the default address of the
next, and nothing outside is touched). Each block runs in a session of its own; what a block leaves running (a
``gload serve &``) is ended after the last block. Every failure is reported at the end; the exit status is 1 if any.

    scripts/docs-test.py [--gload bin/gload] [--python .venv/bin/python] [--timeout 120] [FILE.md ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(r"^\s*<!--\s*runnable\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^`]*)$")
SHELLS = {"sh", "bash", "shell", "console"}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence (or of the first line of an indented block)
    lang: str
    text: str
    runnable: bool


@dataclass
class Report:
    failures: List[str] = field(default_factory=list)
    ran: int = 0


def rel(p: Path) -> str:
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def parse(path: Path) -> Tuple[List[Block], List[str]]:
    """The code blocks of a Markdown file (fenced and 4-space indented) and its structural errors."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    errors: List[str] = []
    i = 0
    marked_at: Optional[int] = None
    while i < len(lines):
        line = lines[i]
        if MARK.match(line):
            if marked_at is not None:
                errors.append(f"{rel(path)}:{marked_at + 1}: runnable mark not followed by a code block")
            marked_at = i
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
            words = info.split()
            lang = words[0].lower() if words else ""
            runnable = marked_at is not None or "runnable" in words[1:]
            marked_at = None
            body: List[str] = []
            j = i + 1
            while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                          and lines[j].strip().strip(fence[0]) == ""):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
                j += 1
            if j == len(lines):
                errors.append(f"{rel(path)}:{i + 1}: code fence never closed")
            if runnable and lang not in SHELLS | {"python"}:
                errors.append(f"{rel(path)}:{i + 1}: runnable block in {lang or 'no language'}: want sh or python")
            blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n", runnable))
            i = j + 1
            continue
        if line.strip() and marked_at is not None:
            errors.append(f"{rel(path)}:{marked_at + 1}: runnable mark not followed by a code block")
            marked_at = None
        # A 4-space indented block after a blank line (not a list item's continuation: those are indented by 2).
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            body = []
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                body.append(lines[j][4:])
                j += 1
            blocks.append(Block(path, i + 1, "sh", "\n".join(body).rstrip() + "\n", False))
            i = j
            continue
        i += 1
    if marked_at is not None:
        errors.append(f"{rel(path)}:{marked_at + 1}: runnable mark at the end of the file")
    return blocks, errors


class Flags:
    """The subcommands and flags `gload ... --help` lists, asked once per command path."""

    def __init__(self, gload: str) -> None:
        self.gload = gload
        self.cache: Dict[Tuple[str, ...], Tuple[Set[str], Set[str]]] = {}

    def help(self, path: Tuple[str, ...]) -> Tuple[Set[str], Set[str]]:
        if path not in self.cache:
            out = subprocess.run([self.gload, *path, "--help"], capture_output=True, text=True, timeout=60).stdout
            subs: Set[str] = set()
            flags: Set[str] = set()
            section = ""
            for l in out.splitlines():
                if l.endswith(":") and not l.startswith(" "):
                    section = l
                    continue
                if section == "Available Commands:" and l.startswith("  "):
                    subs.add(l.split()[0])
                elif "Flags:" in section:
                    m = re.match(r"^\s+(?:(-\w), )?(--[\w-]+)", l)
                    if m:
                        flags.update(x for x in m.groups() if x)
            self.cache[path] = (subs, flags)
        return self.cache[path]

    def check(self, words: List[str]) -> Optional[str]:
        """words: a command line's words after `gload`. None if every subcommand and flag exists."""
        path: Tuple[str, ...] = ()
        rest = list(words)
        while rest and not rest[0].startswith("-"):
            subs, _ = self.help(path)
            if not subs:
                break
            if rest[0] not in subs:
                return f"gload {' '.join(path + (rest[0],))}: no such command"
            path += (rest.pop(0),)
        _, flags = self.help(path)
        flags = flags | self.help(())[1]  # global flags
        for w in rest:
            if w == "--":
                break
            if w.startswith("-") and w not in ("-", "--"):
                name = w.split("=", 1)[0]
                if name not in flags:
                    return f"gload {' '.join(path)}: unknown flag {name}"
        return None


def command_lines(text: str) -> List[List[str]]:
    """The gload invocations of a shell block: word lists after each `gload`, continuation lines joined, stopping
    at a pipe, `;`, `&&`, `||`, `&`, a redirection or a comment."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out: List[List[str]] = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0]
        try:
            words = shlex.split(line, comments=True, posix=True)
        except ValueError:
            words = line.split()
        for k, w in enumerate(words):
            starts = k == 0 or words[k - 1] in ("|", ";", "&&", "||", "&", "exec", "time", "nice", "then", "do") \
                or re.fullmatch(r"\w+=\S*", words[k - 1]) is not None
            if (w == "gload" or w.endswith("/gload")) and starts:
                cmd: List[str] = []
                for x in words[k + 1:]:
                    if x in ("|", ";", "&&", "||", "&", ">", "<", "2>", ">>") or x.startswith((">", "<", "2>")):
                        break
                    cmd.append(x)
                if cmd and (cmd[0].startswith("-") or re.fullmatch(r"[a-z]+", cmd[0])):
                    out.append(cmd)
    return out


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    h = heading.strip().lower().replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def check_links(path: Path) -> List[str]:
    """Relative links of a Markdown file that name a missing file or a heading that is not there."""
    errors = []
    text = path.read_text(encoding="utf-8")
    text_no_code = re.sub(r"```.*?```", "", text, flags=re.S)
    for n, line in enumerate(text_no_code.splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, frag = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                errors.append(f"{rel(path)}: link to {target}: no such file")
                continue
            if frag and dest.suffix == ".md":
                heads = {anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", dest.read_text(encoding="utf-8"), re.M)}
                if frag not in heads:
                    errors.append(f"{rel(path)}: link to {target}: no heading #{frag} in {rel(dest)}")
    return errors


def run_block(b: Block, work: Path, env: Dict[str, str], python: str, timeout: float,
              sessions: List[int]) -> Optional[str]:
    if b.lang == "python":
        script = work / ".docs-block.py"
        script.write_text(b.text, encoding="utf-8")
        argv = [python, str(script)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", b.text]
    t0 = time.monotonic()
    # Output goes to a file, not a pipe: a server the block leaves running keeps its stdout open.
    log = work / ".docs-block.out"
    with open(log, "w+", encoding="utf-8", errors="replace") as f:
        p = subprocess.Popen(argv, cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        sessions.append(p.pid)
        try:
            p.wait(timeout=timeout)
            note = ""
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            note = f"\n(timed out after {timeout:.0f} s)"
        f.seek(0)
        out = f.read() + note
    secs = time.monotonic() - t0
    sys.stdout.write("".join(f"    | {l}\n" for l in out.splitlines()[-40:]))
    print(f"    exit {p.returncode} in {secs:.1f} s")
    if p.returncode != 0:
        return f"{rel(b.path)}:{b.line}: {b.lang} block exited {p.returncode}:\n{b.text}{out[-2000:]}"
    return None


def end_sessions(sessions: List[int]) -> None:
    alive = []
    for pgid in sessions:
        try:
            os.killpg(pgid, signal.SIGTERM)
            alive.append(pgid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    for pgid in alive:
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def default_files() -> List[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    first = [ROOT / "README.md", ROOT / "docs" / "tokenizing.md"]
    return first + [d for d in docs if d not in first] + [ROOT / "bench" / "README.md", ROOT / "pyclient" / "README.md"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gload", default=str(ROOT / "bin" / "gload"), help="the binary under test (default bin/gload)")
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"),
                    help="Python with the client's dependencies (default .venv/bin/python)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per block")
    ap.add_argument("--check-only", action="store_true", help="check commands and flags, run nothing")
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args()
    gload = str(Path(a.gload).resolve())
    if not os.access(gload, os.X_OK):
        print(f"docs-test: {a.gload} is not an executable: run make build (or give --gload)", file=sys.stderr)
        return 2
    files = [f.resolve() for f in a.files] or default_files()
    rep = Report()
    flags = Flags(gload)
    blocks: List[Block] = []
    for f in files:
        bs, errs = parse(f)
        rep.failures += errs + check_links(f)
        blocks += bs
    checked = 0
    for b in blocks:
        if b.lang in SHELLS:
            for cmd in command_lines(b.text):
                checked += 1
                why = flags.check(cmd)
                if why:
                    rep.failures.append(f"{rel(b.path)}:{b.line}: {why} (in: gload {' '.join(cmd)})")
    runnable = [b for b in blocks if b.runnable]
    print(f"docs-test: {len(blocks)} code blocks in {len(files)} files, {len(runnable)} marked runnable; "
          f"{checked} gload command lines checked against {rel(Path(gload))}'s --help")
    if not runnable:
        rep.failures.append("no block is marked runnable")
    if not a.check_only:
        python = a.python if os.path.isabs(a.python) or "/" not in a.python else str(Path(a.python).resolve())
        with tempfile.TemporaryDirectory(prefix="gload-docs-") as tmp:
            work = Path(tmp)
            (work / "examples").symlink_to(ROOT / "examples")
            bindir = work / ".bin"
            bindir.mkdir()
            (bindir / "gload").symlink_to(gload)
            env = dict(os.environ)
            env["PATH"] = f"{bindir}{os.pathsep}{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
            env["PYTHONPATH"] = str(ROOT / "pyclient") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            env["GLOAD_ADDR"] = f"unix://{work}/gload.sock"
            env["XDG_CACHE_HOME"] = str(work / ".cache")
            env.pop("GLOAD_AUTH_TOKEN", None)
            env.pop("GLOAD_AUTH_TOKEN_FILE", None)
            sessions: List[int] = []
            try:
                for b in runnable:
                    print(f"docs-test: {rel(b.path)}:{b.line} ({b.lang})", flush=True)
                    why = run_block(b, work, env, python, a.timeout, sessions)
                    rep.ran += 1
                    if why:
                        rep.failures.append(why)
            finally:
                end_sessions(sessions)
    if rep.failures:
        print(f"\ndocs-test: {len(rep.failures)} failure(s):", file=sys.stderr)
        for f in rep.failures:
            print(f"- {f}", file=sys.stderr)
        return 1
    print(f"docs-test: ok ({rep.ran} blocks ran)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
