"""What an ELF binary needs from the system, read with pyelftools (the check auditwheel makes): the shared libraries
it links (DT_NEEDED) and, per library, the symbol versions it asks for (.gnu.version_r). From those follows the
oldest glibc a binary runs on, and so the manylinux tag a wheel holding it may carry (PEP 600:
``manylinux_<glibc major>_<glibc minor>_<arch>`` promises the wheel runs on any distribution with that glibc or newer).

Used by build.py (to tag the wheel) and test_wheel.py (to check a built wheel's tag against its binaries).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from elftools.elf.elffile import ELFFile
from elftools.elf.dynamic import DynamicSection
from elftools.elf.gnuversions import GNUVerNeedSection

# The libraries a manylinux wheel may take from the system (PEP 600 / auditwheel's policy: the glibc family and
# the few libraries every distribution has). Anything else must be bundled or not linked.
SYSTEM_LIBS = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1", "libresolv.so.2",
    "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libnsl.so.1",
    "libcrypt.so.1", "libz.so.1", "libexpat.so.1", "libX11.so.6", "libGL.so.1",
})
# glibc's own libraries: their GLIBC_x.y versions set the floor.
GLIBC_LIBS = frozenset({"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
                        "libresolv.so.2", "libnsl.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"})
ARCH = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}

_GLIBC = re.compile(r"^GLIBC_(\d+)\.(\d+)(?:\.\d+)?$")


@dataclass
class Needs:
    """What one ELF file needs: its architecture, linked libraries and symbol versions per library."""
    path: str
    arch: str
    libraries: List[str] = field(default_factory=list)
    versions: Dict[str, Set[str]] = field(default_factory=dict)

    def glibc(self) -> Tuple[int, int]:
        """The newest GLIBC_x.y version asked of glibc's libraries ((2, 0) when none: a static binary, say)."""
        best = (2, 0)
        for lib, vs in self.versions.items():
            for v in vs:
                m = _GLIBC.match(v)
                if m and lib in GLIBC_LIBS:
                    best = max(best, (int(m.group(1)), int(m.group(2))))
        return best

    def foreign(self) -> List[str]:
        """Linked libraries a manylinux wheel may not take from the system."""
        return [lib for lib in self.libraries if lib not in SYSTEM_LIBS]


def read(path: str) -> Needs:
    """Reads what the ELF file at ``path`` needs; raises ValueError for a file that is not ELF."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise ValueError(f"{path}: not an ELF file")
        f.seek(0)
        elf = ELFFile(f)
        machine = elf["e_machine"]
        if machine not in ARCH:
            raise ValueError(f"{path}: architecture {machine} is not one gload wheels are built for ({', '.join(ARCH)})")
        n = Needs(path=path, arch=ARCH[machine])
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                n.libraries += [t.needed for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
            elif isinstance(sec, GNUVerNeedSection):
                for verneed, auxes in sec.iter_versions():
                    n.versions.setdefault(verneed.name, set()).update(a.name for a in auxes)
        return n


def platform_tag(files: Iterable[Needs]) -> str:
    """The manylinux tag that tells the truth for all ``files``: the newest glibc any of them needs, their one
    architecture. Raises ValueError for mixed architectures or a library the system does not provide."""
    files = list(files)
    if not files:
        raise ValueError("no binaries to tag")
    arches = {f.arch for f in files}
    if len(arches) != 1:
        raise ValueError(f"binaries of several architectures: {sorted(arches)}")
    for f in files:
        if f.foreign():
            raise ValueError(f"{f.path} links {f.foreign()}, which a manylinux wheel cannot take from the system")
    major, minor = max(f.glibc() for f in files)
    # PEP 600 has no tag below glibc 2.5 (manylinux1).
    major, minor = max((major, minor), (2, 5))
    return f"manylinux_{major}_{minor}_{arches.pop()}"


def parse_tag(tag: str) -> Optional[Tuple[Tuple[int, int], str]]:
    """((major, minor), arch) of a manylinux_X_Y_ARCH tag, else None."""
    m = re.match(r"^manylinux_(\d+)_(\d+)_(\w+)$", tag)
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2))), m.group(3)


if __name__ == "__main__":
    import sys

    needs = [read(p) for p in sys.argv[1:]]
    for n in needs:
        print(f"{n.path}: {n.arch}, glibc {n.glibc()[0]}.{n.glibc()[1]}, links {', '.join(n.libraries) or 'nothing'}")
    print(platform_tag(needs))
