"""Helpers of the workflow tests: the tiny test configs, merged as Snakemake merges --configfile."""
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def merge(base: dict, extra: dict) -> dict:
    """``extra`` over ``base``, nested mappings merged key by key (Snakemake's --configfile semantics)."""
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def tiny_config(*extras: str) -> dict:
    """.test/config/config.yaml with the named .test/config/<extra>.yaml files merged in order."""
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    for extra in extras:
        config = merge(config, yaml.safe_load((REPO / f".test/config/{extra}.yaml").read_text()))
    return config


def run_snakemake(workdir: Path, *args: str, configs: tuple[str, ...]) -> subprocess.CompletedProcess:
    """Snakemake on the repo's Snakefile in ``workdir`` (2 cores) with ``configs`` relative to it."""
    paths = [str(Path(workdir) / name) for name in configs]
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2", *args, "--configfile", *paths]
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


def dry_run_jobs(workdir: Path, target: str, configs: tuple[str, ...]) -> dict[str, int]:
    """Jobs per rule that a dry run of ``target`` plans."""
    result = run_snakemake(workdir, target, "-n", "--quiet", "rules", configs=configs)
    assert result.returncode == 0, result.stderr[-3000:]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.M) if rule != "total"}


def finished_run(workdir: Path, target: str, extras: tuple[str, ...]) -> Path:
    """``target`` run to the end in ``workdir`` with .test/config/config.yaml and ``extras`` copied to config/."""
    (workdir / "config").mkdir()
    for name in ("config", *extras):
        shutil.copy(REPO / f".test/config/{name}.yaml", workdir / f"config/{name}.yaml")
    started = time.perf_counter()
    result = run_snakemake(workdir, target, configs=tuple(f"config/{name}.yaml" for name in ("config", *extras)))
    print(f"{target} on the tiny config: {time.perf_counter() - started:.0f} s")
    assert result.returncode == 0, result.stderr[-5000:]
    return workdir
