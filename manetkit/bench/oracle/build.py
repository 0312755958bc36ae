"""Compile the ns-3 oracle programs (``ns3/*.cc``) against Debian's ns-3 3.37.

The compiler flags come from pkg-config (``ns3-wifi``, ``ns3-internet``, ...). A binary
is cached under ``$MANETKIT_NS3_CACHE`` (default ``$XDG_CACHE_HOME/manetkit/ns3`` or
``~/.cache/manetkit/ns3``), named by a hash of its source, the flags and the ns-3
version, so an edited program or another ns-3 rebuilds and an unchanged one does not.
The programs share ``ns3/common.h`` (the radio's setup): it is compiled beside each of
them and hashed with it.
Without ns-3 the build fails with :class:`Ns3Unavailable`, naming the packages to install.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from manetkit.errors import UserError

DEBIAN_PACKAGES = "g++ pkg-config libns3-dev"
INSTALL_HINT = f"install them with: apt-get install {DEBIAN_PACKAGES} (Debian 12 ships ns-3 3.37)"
PKG_MODULES = (
    "ns3-core",
    "ns3-network",
    "ns3-mobility",
    "ns3-propagation",
    "ns3-wifi",
    "ns3-internet",
    "ns3-applications",
)
PROGRAMS = ("per", "chain")


class Ns3Unavailable(UserError):
    """ns-3's development files (or the compiler) are missing or do not build."""


def cache_dir() -> Path:
    if env := os.environ.get("MANETKIT_NS3_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "manetkit" / "ns3"


def _ns3_dir() -> Traversable:
    return resources.files("manetkit.bench.oracle") / "ns3"


def source(program: str) -> bytes:
    if program not in PROGRAMS:
        raise ValueError(f"program {program!r}: not one of {', '.join(PROGRAMS)}")
    return (_ns3_dir() / f"{program}.cc").read_bytes()


def headers() -> dict[str, bytes]:
    """The headers the programs include (``common.h``), by name."""
    return {h.name: h.read_bytes() for h in _ns3_dir().iterdir() if h.name.endswith(".h")}


def _pkg_config(*args: str) -> str:
    try:
        out = subprocess.run(
            ["pkg-config", *args, *PKG_MODULES], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise Ns3Unavailable(
            f"ns-3 development files not found (pkg-config is not installed); {INSTALL_HINT}"
        ) from None
    if out.returncode != 0:
        why = out.stderr.strip().splitlines()[0] if out.stderr.strip() else "no output"
        raise Ns3Unavailable(
            f"ns-3 development files not found (pkg-config {' '.join(PKG_MODULES)}: {why}); "
            f"{INSTALL_HINT}"
        )
    return out.stdout.strip()


def clean_flags(flags: str) -> list[str]:
    """pkg-config's words, minus two flaws of Debian's ns-3 3.37 ``.pc`` files: an
    include path glued to a ``;`` (``-I/usr;``) and absolute paths of libraries that
    only their -dev packages provide (``libgsl.so``, ``libsqlite3.so``): the ns-3
    libraries already name them as dependencies."""
    words = []
    for w in shlex.split(flags):
        if w.startswith("-I") and ";" in w:
            continue
        if w.startswith("/") and w.endswith(".so") and not Path(w).exists():
            continue
        words.append(w)
    return words


def ns3_version() -> str:
    """ns-3's version as pkg-config reports it (``3.37``)."""
    return _pkg_config("--modversion").splitlines()[0]


def build(program: str, cache: Path | None = None, cxx: str = "g++") -> Path:
    """The path of ``program``'s binary, compiled first if the cache has none for this
    source, these flags and this ns-3."""
    src = source(program)
    hdrs = headers()
    flags = clean_flags(_pkg_config("--cflags", "--libs"))
    version = ns3_version()
    digest = hashlib.sha256(src)
    for name in sorted(hdrs):
        digest.update(f"\0{name}\0".encode() + hdrs[name])
    digest.update("\0".join([cxx, version, *flags]).encode())
    key = digest.hexdigest()[:16]
    cache = cache or cache_dir()
    binary = cache / f"{program}-{key}"
    if binary.exists():
        return binary
    if shutil.which(cxx) is None:
        raise Ns3Unavailable(f"C++ compiler {cxx!r} not found; {INSTALL_HINT}")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{program}-") as tmp:
        cc = Path(tmp) / f"{program}.cc"
        cc.write_bytes(src)
        for name, text in hdrs.items():
            (Path(tmp) / name).write_bytes(text)
        out = Path(tmp) / program
        res = subprocess.run(
            [cxx, "-std=c++17", "-O2", "-o", str(out), str(cc), *flags],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            tail = "\n".join(res.stderr.strip().splitlines()[-15:])
            raise Ns3Unavailable(
                f"building the ns-3 program {program!r} failed ({cxx}, ns-3 {version}):\n{tail}"
            )
        os.replace(out, binary)  # atomic: a concurrent build never sees half a binary
    return binary
