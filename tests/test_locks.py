"""The two install locks: the CPU one (this machine, CI) and the CUDA one (a cluster's GPU nodes).

They must install the same code but torch's build: every package both pin has the same version, and what
only the CUDA lock pins is there because PyPI's torch requires it. `make setup` must take the lock its
``TORCH`` names, with nothing pointing at a folder of the machine that wrote the locks.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CPU_LOCK = REPO / "requirements/lock.txt"
CUDA_LOCK = REPO / "requirements/lock-cuda.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


@dataclass
class Pin:
    version: str
    hashes: int = 0
    via: set[str] = field(default_factory=set)


def read_lock(path: Path) -> dict[str, Pin]:
    """``{normalised name: Pin}`` of a pip-compile lock: version, hash count and its ``# via`` requirers."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    in_via = False
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            current = pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = Pin(match[2])
            in_via = False
        elif current is None:
            continue
        elif "--hash=sha256:" in line:
            current.hashes += 1
        elif (stripped := line.strip()).startswith("# via"):
            rest = stripped.removeprefix("# via").strip()
            in_via = not rest
            if rest:
                current.via.add(rest.split()[0].lower())
        elif in_via and stripped.startswith("#   "):
            current.via.add(stripped.removeprefix("#").split()[0].lower())
    return pins


def public(version: str) -> str:
    """The public part of a version: ``2.13.0+cpu`` -> ``2.13.0``."""
    return version.split("+")[0]


@pytest.fixture(scope="module")
def locks() -> tuple[dict[str, Pin], dict[str, Pin]]:
    return read_lock(CPU_LOCK), read_lock(CUDA_LOCK)


def test_torch_is_the_cpu_build_in_one_and_pypis_in_the_other(locks):
    cpu, cuda = locks
    assert cpu["torch"].version == "2.13.0+cpu"
    assert cuda["torch"].version == "2.13.0"


def test_both_locks_pin_the_same_versions(locks):
    cpu, cuda = locks
    differing = {
        name: (cpu[name].version, cuda[name].version)
        for name in cpu.keys() & cuda.keys()
        if public(cpu[name].version) != public(cuda[name].version)
    }
    assert not differing, f"versions differ between {CPU_LOCK.name} and {CUDA_LOCK.name}: {differing}"
    assert not cpu.keys() - cuda.keys(), f"only in {CPU_LOCK.name}: {sorted(cpu.keys() - cuda.keys())}"


def test_what_only_the_cuda_lock_pins_is_torchs_own(locks):
    """Each CUDA-only package is required by torch, or by another CUDA-only package, and by nothing else."""
    cpu, cuda = locks
    extra = cuda.keys() - cpu.keys()
    assert any(name.startswith("nvidia-") for name in extra), "no CUDA runtime package in the CUDA lock"
    family = extra | {"torch"}
    strays = {name: sorted(cuda[name].via - family) for name in extra if not cuda[name].via <= family}
    assert not strays, f"in {CUDA_LOCK.name} only, required by more than torch's CUDA family: {strays}"


@pytest.mark.parametrize("lock", [CPU_LOCK, CUDA_LOCK], ids=lambda path: path.name)
def test_every_pin_has_hashes_and_no_local_path(lock):
    pins = read_lock(lock)
    assert not [name for name, pin in pins.items() if not pin.hashes]
    options = "\n".join(line for line in lock.read_text().splitlines() if not line.lstrip().startswith("#"))
    assert "--find-links" not in options and "file://" not in options and "/opt/" not in options, (
        f"{lock.name} names a location of the machine that wrote it"
    )


def _make_setup(venv: Path, *assignments: str, dry_run: bool = True) -> subprocess.CompletedProcess:
    flags = ["-n"] if dry_run else []
    return subprocess.run(
        ["make", "--no-print-directory", *flags, "setup", f"VENV={venv}", *assignments],
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def _install_line(output: str) -> str:
    return next(line for line in output.splitlines() if "pip install" in line and "--require-hashes" in line)


def test_setup_takes_the_cpu_lock_by_default_and_the_cuda_lock_on_request(tmp_path):
    default = _make_setup(tmp_path / "venv")
    assert default.returncode == 0, default.stderr
    assert "-r requirements/lock.txt" in _install_line(default.stdout)
    assert "--find-links" in _install_line(default.stdout)
    cuda = _make_setup(tmp_path / "venv", "TORCH=cuda")
    assert cuda.returncode == 0, cuda.stderr
    assert "-r requirements/lock-cuda.txt" in _install_line(cuda.stdout)
    assert "--find-links" not in _install_line(cuda.stdout)


def test_setup_refuses_an_unknown_torch_and_a_venv_of_the_other_flavour(tmp_path):
    unknown = _make_setup(tmp_path / "venv", "TORCH=rocm")
    assert unknown.returncode != 0 and "TORCH must be cpu or cuda" in unknown.stderr
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".torch").write_text("cuda\n")
    # a venv of the CUDA lock: `make setup` keeps its flavour, and asking for the CPU one is refused
    assert "-r requirements/lock-cuda.txt" in _install_line(_make_setup(venv).stdout)
    switched = _make_setup(venv, "TORCH=cpu", dry_run=False)
    assert switched.returncode != 0 and "holds the cuda torch" in switched.stderr
