"""Helpers of the workflow tests: the tiny test configs, merged as Snakemake merges --configfile."""

import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

REPO = Path(__file__).resolve().parents[2]


def merge(base: dict, extra: dict) -> dict:
    """``extra`` over ``base``, nested mappings merged key by key (Snakemake's --configfile semantics)."""
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = (
            merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def tiny_config(*extras: str) -> dict:
    """.test/config/config.yaml with the named .test/config/<extra>.yaml files merged in order."""
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    for extra in extras:
        config = merge(config, yaml.safe_load((REPO / f".test/config/{extra}.yaml").read_text()))
    return config


# A test must not fail because the machine is busy. Sharing the cores stretches a command's wall-clock
# time but not its CPU time, so each command gets a CPU-time limit (per process: Snakemake and each of its
# jobs, inherited) of CORES x its budget, and a wall-clock limit HANG_FACTOR x its budget that only guards
# against a hang. A budget is a generous idle time on 2 cores.
CORES = 2
HANG_FACTOR = 10


def run_bounded(command: list[str], budget_s: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command)`` (output captured as text) within ``budget_s`` on 2 idle cores.

    Each process may use ``CORES * budget_s`` CPU seconds (SIGXCPU ends it, no core file); the whole
    command ``HANG_FACTOR * budget_s`` wall-clock seconds. Either limit fails the test, saying which.
    """
    cpu_s = math.ceil(CORES * budget_s)

    def limit_cpu():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 30))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    wall_s = HANG_FACTOR * budget_s
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=wall_s, preexec_fn=limit_cpu, **kwargs)
    except subprocess.TimeoutExpired as error:
        pytest.fail(
            f"{' '.join(map(str, command))} ran {wall_s:.0f} s wall-clock, {HANG_FACTOR}x its budget: hung?\n{_tail(error.stderr)}"
        )
    if result.returncode in (-signal.SIGXCPU, -signal.SIGKILL) or "SIGXCPU" in result.stderr:
        pytest.fail(
            f"{' '.join(map(str, command))} (or one of its jobs) used over {cpu_s} CPU seconds:\n{result.stderr[-3000:]}"
        )
    return result


def _tail(output) -> str:
    text = output.decode(errors="replace") if isinstance(output, bytes) else output or ""
    return text[-3000:]


def run_snakemake(
    workdir: Path, *args: str, configs: tuple[str, ...], budget_s: float = 900
) -> subprocess.CompletedProcess:
    """Snakemake on the repo's Snakefile in ``workdir`` (2 cores) with ``configs`` relative to it."""
    paths = [str(Path(workdir) / name) for name in configs]
    where = ["-s", str(REPO / "workflow/Snakefile"), "-d", str(workdir)]
    command = [sys.executable, "-m", "snakemake", *where, "--cores", "2", *args, "--configfile", *paths]
    return run_bounded(command, budget_s)


def dry_run_jobs(workdir: Path, target: str, configs: tuple[str, ...]) -> dict[str, int]:
    """Jobs per rule that a dry run of ``target`` plans."""
    result = run_snakemake(workdir, target, "-n", "--quiet", "rules", configs=configs)
    assert result.returncode == 0, result.stderr[-3000:]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.M) if rule != "total"}


def dry_run_after_edit(workdir: Path, target: str, section: tuple[str, ...], **values) -> dict[str, int]:
    """Jobs per rule a dry run of ``target`` plans once ``values`` are set in the config's ``section``
    (written as ``config/edited.yaml`` beside the run's ``config/config.yaml``)."""
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    node = config
    for key in section:
        node = node[key]
    node.update(values)
    (workdir / "config/edited.yaml").write_text(yaml.safe_dump(config))
    return dry_run_jobs(workdir, target, ("config/edited.yaml",))


# The tiny config of every track, run once per session and shared by the end-to-end tests.
ALL_TRACKS = ("i2t", "t2i", "crc", "trust")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """Every track's default targets (``all``) on ``tiny_config(*ALL_TRACKS)``, written as ``config/config.yaml``.

    Run once per session: under pytest-xdist the first worker to ask runs it in the session's shared
    temporary folder while the others wait on a lock, and a failure fails every reader. Read it, never
    write to it: a test that edits or reruns works on :func:`copy_run`'s copy.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run_every_track(tmp_path_factory.mktemp("tiny_run"))
    shared = tmp_path_factory.getbasetemp().parent  # the session's, above each worker's own
    workdir, done, failed = shared / "tiny_run", shared / "tiny_run.done", shared / "tiny_run.failed"
    with FileLock(shared / "tiny_run.lock"):
        if failed.exists():
            pytest.fail(f"the shared tiny run failed on another worker:\n{failed.read_text()}")
        if not done.exists():
            workdir.mkdir(exist_ok=True)
            try:
                _run_every_track(workdir)
            except BaseException as error:
                failed.write_text(str(error))
                raise
            done.touch()
    return workdir


def _run_every_track(workdir: Path) -> Path:
    (workdir / "config").mkdir()
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(tiny_config(*ALL_TRACKS)))
    started = time.perf_counter()
    result = run_snakemake(workdir, "all", configs=("config/config.yaml",), budget_s=1500)
    print(f"every track on the tiny config: {time.perf_counter() - started:.0f} s")
    assert result.returncode == 0, result.stderr[-5000:]
    return workdir


def copy_run(run: Path, dest: Path) -> Path:
    """A copy of a finished run that Snakemake finds up to date: files, modification times and metadata."""
    shutil.copytree(run, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns("locks"))
    return dest
