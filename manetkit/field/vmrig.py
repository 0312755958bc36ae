"""The mac80211_hwsim IBSS rig: a stock Debian kernel under qemu, driven from the host.

This machine's kernel has no mac80211_hwsim; a Debian kernel booted under qemu has. The
rig (facts established while building it, docs/field.md):

- fetches the kernel package ``linux-image-amd64`` depends on with ``apt-get download``
  into a cache directory and unpacks it with ``dpkg -x`` (``depmod -b``: the package
  ships no modules.dep);
- builds a small initramfs: busybox-static, the virtio/9p modules to reach the host,
  mac80211_hwsim with its dependencies, and ``/init`` (``guest-init.sh``);
- boots ``qemu-system-x86_64 -accel tcg -M pc`` (``/dev/kvm`` here cannot run a stock
  kernel; ``-M microvm`` hung once in four runs) with the host's root shared read-only
  over virtio-9p and a writable result directory;
- the guest chroots into the host's root so it runs the host's Python and this very
  checkout of manetkit (``manetkit.field.guest``), writes ``result.json`` into the
  result directory and powers off. The host reads the JSON.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from manetkit.errors import UserError

DEFAULT_CACHE = Path(os.environ.get("MANETKIT_VM_CACHE", "/var/cache/manetkit/vm"))
# Modules the initramfs loads before it can see the host (virtio PCI + 9p) and the ones
# the test needs (hwsim; tun for the daemon's mesh0); dependencies are resolved by modprobe.
MODULES = ["virtio_pci", "9pnet_virtio", "9p", "mac80211_hwsim", "tun"]
BUSYBOX_APPLETS = ["sh", "mount", "mkdir", "modprobe", "chroot", "poweroff", "cat", "echo", "sed"]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The guest mounts a tmpfs over these in its chroot of the host's root.
GUEST_TMPFS = [Path("/tmp"), Path("/run"), Path("/var/tmp")]
GUEST_INIT = Path(__file__).with_name("guest-init.sh")
REPO_ROOT = Path(__file__).resolve().parents[2]
# What the guest's Python processes import (the guest itself, ibss-up, the daemon, its
# engines and nl80211 backend, ``manetkit status``, the HTTP server): compiled on the host
# before boot, see warm_bytecode().
GUEST_IMPORTS = [
    "manetkit.field.guest", "manetkit.field.ibss", "manetkit.daemon.__main__",
    "manetkit.daemon.shell", "manetkit.daemon.engines.aodv", "manetkit.daemon.engines.dsr",
    "manetkit.daemon.linksense.nl80211", "manetkit.daemon.statuscli", "manetkit.cli",
    "uvloop", "pyroute2.iwutil", "http.server", "hashlib", "concurrent.futures",
]  # fmt: skip
# Also run on the host: builds the daemon's pydantic models and validates a config for
# each engine, which imports what pydantic loads lazily.
WARM_CODE = """
import compileall, importlib, sys
compileall.compile_dir(sys.argv[1], quiet=1)
for name in sys.argv[2:]:
    importlib.import_module(name)
from manetkit.daemon.config import parse_config
for protocol in ("aodv", "dsr", "static"):
    parse_config({"address": "10.42.0.1", "protocol": protocol, "ethertype": "0x88B6",
                  "link_sensing": {"backend": "nl80211", "poll_s": 0.5}}).effective()
"""


@dataclass(frozen=True, slots=True)
class Kernel:
    version: str  # "6.1.0-56-amd64"
    vmlinuz: Path
    tree: Path  # unpacked package (lib/modules/VERSION/...)


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise UserError(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done


def kernel_package() -> str:
    """The versioned package ``linux-image-amd64`` depends on (``linux-image-6.1.0-56-amd64``)."""
    out = _run(["apt-cache", "depends", "linux-image-amd64"]).stdout
    for line in out.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "Depends" and value.startswith("linux-image-"):
            return value.strip()
    raise UserError("apt-cache knows no linux-image-amd64 dependency: run 'apt-get update' first")


APT_SANDBOX_USER = "_apt"  # apt's APT::Sandbox::User default (apt.conf(5))


def hand_to_sandbox_user(directory: Path, user: str = APT_SANDBOX_USER) -> None:
    """Make ``directory`` (mode 0700, from :func:`tempfile.mkdtemp`) writable by apt's
    sandbox user alone: owned by it when it exists and we are root; otherwise apt runs
    the download as us and the directory stays ours."""
    import pwd

    os.chmod(directory, 0o700)
    if os.geteuid() != 0:
        return
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return
    os.chown(directory, entry.pw_uid, entry.pw_gid)


def fetch_kernel(cache: Path) -> Kernel:
    """Download and unpack the kernel package once; later runs reuse the cache."""
    cache.mkdir(parents=True, exist_ok=True)
    package = kernel_package()
    version = package.removeprefix("linux-image-")
    tree = cache / f"tree-{version}"
    vmlinuz = tree / "boot" / f"vmlinuz-{version}"
    if vmlinuz.exists() and (tree / "lib/modules" / version / "modules.dep").exists():
        return Kernel(version, vmlinuz, tree)
    debs = sorted(cache.glob(f"{package}_*.deb"))
    if not debs:
        # apt drops privileges to its sandbox user (_apt), which may not write the cache:
        # download into a private temporary directory that only that user may write (never
        # a world-writable one: as root, another local user could plant files or links in
        # it), then move the package in.
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            hand_to_sandbox_user(Path(tmp))
            _run(["apt-get", "download", "-q", package], cwd=tmp)
            for deb in Path(tmp).glob("*.deb"):
                shutil.move(str(deb), cache / deb.name)
        debs = sorted(cache.glob(f"{package}_*.deb"))
    if not debs:
        raise UserError(f"apt-get download {package} left no .deb in {cache}")
    partial = cache / f"tree-{version}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _run(["dpkg", "-x", str(debs[-1]), str(partial)])
    _run(["depmod", "-b", str(partial), version])
    shutil.rmtree(tree, ignore_errors=True)
    partial.rename(tree)
    return Kernel(version, vmlinuz, tree)


def module_files(kernel: Kernel, names: list[str]) -> list[Path]:
    """Every .ko file ``names`` need, dependencies first (``modprobe --show-depends``)."""
    files: list[Path] = []
    for name in names:
        out = _run(
            ["modprobe", "-d", str(kernel.tree), "-S", kernel.version, "--show-depends", name]
        ).stdout
        for line in out.splitlines():
            parts = line.split()
            if parts[:1] == ["insmod"] and Path(parts[1]) not in files:
                files.append(Path(parts[1]))
    return files


def build_initramfs(kernel: Kernel, cache: Path) -> Path:
    """busybox + modules + /init as a gzip'd newc cpio (``busybox cpio``: Debian's
    busybox-static has no separate cpio binary)."""
    busybox = shutil.which("busybox")
    if not busybox:
        raise UserError("busybox not found: apt-get install busybox-static")
    out = cache / f"initramfs-{kernel.version}.cpio.gz"
    stamp = [GUEST_INIT.read_bytes(), " ".join(MODULES).encode()]
    stamp_file = out.with_suffix(".stamp")
    if out.exists() and stamp_file.exists() and stamp_file.read_bytes() == b"\0".join(stamp):
        return out
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("bin", "dev", "proc", "sys", "host", "results"):
            (root / d).mkdir()
        shutil.copy2(busybox, root / "bin/busybox")
        for applet in BUSYBOX_APPLETS:
            (root / "bin" / applet).symlink_to("busybox")
        moddir = root / "lib/modules" / kernel.version
        for ko in module_files(kernel, MODULES):
            dest = moddir / ko.relative_to(kernel.tree / "lib/modules" / kernel.version)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ko, dest)
        for extra in ("modules.builtin", "modules.order", "modules.builtin.modinfo"):
            src = kernel.tree / "lib/modules" / kernel.version / extra
            if src.exists():
                shutil.copy2(src, moddir / extra)
        _run(["depmod", "-b", str(root), kernel.version])
        shutil.copy2(GUEST_INIT, root / "init")
        (root / "init").chmod(0o755)
        names = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        listing = ("\n".join(names) + "\n").encode()
        raw = subprocess.run(
            [busybox, "cpio", "-o", "-H", "newc"], cwd=root, input=listing, capture_output=True
        )
        if raw.returncode != 0:
            raise UserError(f"busybox cpio failed: {raw.stderr.decode().strip()}")
        tmp_out = out.with_suffix(".tmp")
        subprocess.run(["gzip", "-1"], input=raw.stdout, stdout=tmp_out.open("wb"), check=True)
        tmp_out.rename(out)
    stamp_file.write_bytes(b"\0".join(stamp))
    return out


def warm_bytecode(prefix: Path) -> None:
    """Compile what the guest imports into a bytecode cache (``PYTHONPYCACHEPREFIX``).

    The host runs with PYTHONDONTWRITEBYTECODE, so this checkout has no ``__pycache__``
    and every Python process in the guest compiled manetkit from source: under TCG that
    made each daemon take tens of seconds to start. The host compiles in about a second;
    the guest reads the cache through the read-only 9p share. Stale entries are
    recompiled here (Python checks each source's mtime), never in the guest.
    """
    prefix.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONPATH": os.pathsep.join(python_path())}
    _run(
        [sys.executable, "-S", "-c", WARM_CODE, str(REPO_ROOT / "manetkit"), *GUEST_IMPORTS],
        env=env,
        cwd="/",
    )


def python_path() -> list[str]:
    """This checkout, then every site-packages this interpreter uses (the guest runs
    ``-S``): its own, and a virtualenv's system site-packages
    (``--system-site-packages``), which ``sysconfig`` does not name."""
    own = [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    used = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [str(REPO_ROOT), *dict.fromkeys([*own, *used])]


def kept_paths(paths: list[Path]) -> list[Path]:
    """Of ``paths`` (the checkout, the interpreter, its site-packages), those the guest's
    tmpfs would hide (under /tmp, /run or /var/tmp: a CI clone, a virtualenv), outermost
    only: the guest bind-mounts each back over its tmpfs (guest-init.sh, mk_keep=)."""
    hidden = sorted({p for p in paths if any(p.is_relative_to(d) for d in GUEST_TMPFS)})
    out: list[Path] = []
    for p in hidden:
        if not any(p.is_relative_to(k) for k in out):
            out.append(p)
    return out


def keep_cmdline(paths: list[Path]) -> str:
    """The kernel command line item naming the paths to keep (comma-separated)."""
    for p in paths:
        if "," in str(p) or " " in str(p):
            raise UserError(f"cannot pass {p} to the guest: its path has a comma or a space")
    return f"mk_keep={','.join(str(p) for p in paths)}" if paths else ""


def guest_launcher(plan: dict) -> str:
    """The script the guest runs inside its chroot of the host's root."""
    return "\n".join(
        [
            "cd /tmp",
            # no plugin scan: pydantic would read every installed package's metadata
            "export HOME=/tmp PYTHONDONTWRITEBYTECODE=1 PYDANTIC_DISABLE_PLUGINS=__all__",
            f"export PATH={shlex.quote(plan['env']['PATH'])}",
            f"export PYTHONPATH={shlex.quote(':'.join(plan['pythonpath']))}",
            f"export PYTHONPYCACHEPREFIX={shlex.quote(plan['pycache'])}",
            f"exec {shlex.join(plan['python'])} -m manetkit.field.guest /tmp/results/plan.json",
            "",
        ]
    )


def qemu_command(kernel: Kernel, initramfs: Path, results: Path, cmdline: str) -> list[str]:
    return [
        "qemu-system-x86_64",
        "-accel", "tcg",
        "-M", "pc",
        "-cpu", "max",
        "-smp", "2",
        "-m", "2048",
        "-nodefaults",
        "-display", "none",
        "-no-reboot",
        "-serial", "stdio",
        "-kernel", str(kernel.vmlinuz),
        "-initrd", str(initramfs),
        "-append", f"console=ttyS0 panic=-1 quiet loglevel=3 {cmdline}",
        "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={results},mount_tag=results,security_model=none",
    ]  # fmt: skip


def _die_with_parent() -> None:
    """In the qemu child before exec: SIGKILL it when the host process dies (a killed
    test run must not leave an emulator spinning on the shared cores)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_qemu(argv: list[str], timeout: float) -> str:
    """Run qemu to its end (the guest powers off) or kill it after ``timeout`` seconds,
    and on any exception (KeyboardInterrupt, a test timeout); return the console text."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return out.decode(errors="replace") + f"\n[host] qemu killed after {timeout:.0f} s\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass
class RigResult:
    ok: bool
    seconds: float
    report: dict
    console: str


def run_rig(
    protocols: tuple[str, ...] = ("aodv", "dsr"),
    cache: Path = DEFAULT_CACHE,
    keep: Path | None = None,
    timeout: float = 300.0,
    record: Path | None = None,
    profile: bool = False,
) -> RigResult:
    """Boot the guest, run ``manetkit.field.guest`` there, return its report."""
    if not shutil.which("qemu-system-x86_64"):
        raise UserError("qemu-system-x86_64 not found: apt-get install qemu-system-x86")
    start = time.monotonic()
    kernel = fetch_kernel(cache)
    initramfs = build_initramfs(kernel, cache)
    results = Path(tempfile.mkdtemp(prefix="manetkit-vm-"))
    try:
        pycache = cache.resolve() / "pycache"
        if any(pycache.is_relative_to(d) for d in GUEST_TMPFS):
            pycache = results / "pycache"  # hidden in the guest: use the shared result dir
        warm_bytecode(pycache)
        plan = {
            "protocols": list(protocols),
            "repo": str(REPO_ROOT),
            # -S: no site processing (.pth files, editable finders): Python starts in a
            # tenth of the time, which matters under TCG; PYTHONPATH names what it needs.
            "python": [sys.executable, "-S"],
            "pythonpath": python_path(),
            "pycache": str(pycache).replace(str(results), "/tmp/results", 1),
            "record": bool(record),
            "profile": profile,
            # the host's Python first, then the system tools (ip, iw, ping, curl)
            "env": {"PATH": f"{Path(sys.executable).parent}:{SYSTEM_PATH}"},
        }
        (results / "plan.json").write_text(json.dumps(plan))
        (results / "run.sh").write_text(guest_launcher(plan))
        # The interpreter may live in a virtualenv under /tmp too ("python3: not found").
        interpreter = [Path(sys.prefix), Path(sys.executable).resolve().parent]
        kept = kept_paths([REPO_ROOT, *interpreter, *map(Path, python_path())])
        argv = qemu_command(kernel, initramfs, results, keep_cmdline(kept))
        console = run_qemu(argv, timeout)
        (results / "console.log").write_text(console)
        report_file = results / "result.json"
        report = json.loads(report_file.read_text()) if report_file.exists() else {}
        if record and report:
            save_samples(results, record)
        ok = bool(report) and all(step.get("ok") for step in report.get("steps", []))
        return RigResult(ok, time.monotonic() - start, report, console)
    finally:
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for f in results.iterdir():
                shutil.copy2(f, keep / f.name)
        shutil.rmtree(results, ignore_errors=True)


def save_samples(results: Path, dest: Path) -> None:
    """Copy the station dumps the guest recorded into the test data folder."""
    for name, sub in (("hwsim_ibss.txt", "iw"), ("hwsim_station_dump.json", "nl80211")):
        src = results / name
        if src.exists():
            (dest / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / sub / name)
