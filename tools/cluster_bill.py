"""The paper config's bill on a cluster: each GPU rule's jobs, memory and GPU-hours, from a dry run.

Plans ``config/paper.yaml`` (+ ``config/allow_pickles.yaml``) from an empty working folder, as a lab's
first run would, under ``profiles/slurm`` and the config's ``cluster`` site (default H100-80GB, 48 h),
and reads each job's resources: ``runtime`` (asked), ``gpu_floor_min`` (its FLOPs at 40% of the card's
bf16 peak, ``condeval.core.resources``), ``gpu_mem_mb`` and ``mem_mb``. Rules whose resources are not
yet computed from their config show their fixed runtime and no floor. Writes the Markdown table into
the ``cluster_bill`` block of docs/cluster.md with ``--write``, else prints it, with the disk the run
takes at its peak: the catalogue's sources (``config/sources.yaml``: downloads by their size, hub
checkpoints by their parameters in float32, manual data by its ``disk_gb``), the outputs the GPU jobs
keep (``written_mb``) and their scratch (``scratch_mb``: training row caches, all at once at worst)::

    python tools/cluster_bill.py [--write] [--config KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml
from readme_tables import write_docs

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("all", "ablations", "crel_i2t_num_z0", "scaling")
#: The paper config's goal, H100 GPU-hours in all (issue 56).
GOAL_GPU_HOURS = 300


def dry_run(extra_config: list[str]) -> str:
    """The dry run's stdout: every job of the paper targets with its resources."""
    with tempfile.TemporaryDirectory() as workdir:
        command = [
            sys.executable,
            "-m",
            "snakemake",
            *TARGETS,
            "-s",
            str(ROOT / "workflow/Snakefile"),
            "-d",
            workdir,
            "--configfile",
            str(ROOT / "config/paper.yaml"),
            str(ROOT / "config/allow_pickles.yaml"),
            "--profile",
            str(ROOT / "profiles/slurm"),
            "-n",
        ]
        if extra_config:
            command += ["--config", *extra_config]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode:
        raise SystemExit(f"the dry run failed:\n{result.stderr[-3000:]}")
    return result.stdout


def gpu_jobs(stdout: str) -> dict[str, list[dict]]:
    """Each GPU rule's jobs' integer resources (the jobs granted ``gpu``)."""
    jobs = defaultdict(list)
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", stdout):
        rule, resources = re.match(r"(?:local)?rule (\w+):", block), re.search(r"resources: (.*)", block)
        if not (rule and resources):
            continue
        values = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)(?:,|$)", resources.group(1))}
        if values.get("gpu", 0) > 0:
            jobs[rule.group(1)].append(values)
    return dict(jobs)


def bill_rows(jobs: dict[str, list[dict]]) -> list[dict]:
    """One row per GPU rule: jobs (each part of a split job counted), peak GPU and host memory (GB), longest
    job and GPU-hours asked, floor."""
    rows = []
    for rule, values in sorted(jobs.items()):
        floors = [job.get("gpu_floor_min") for job in values]
        rows.append(
            {
                "rule": rule,
                "jobs": sum(job.get("parts", 1) for job in values),
                "gpu_gb": max((job.get("gpu_mem_mb", 0) for job in values), default=0) / 1024,
                "host_gb": max(job.get("mem_mb", 0) for job in values) / 1024,
                "longest_h": max(job["runtime"] for job in values) / 60,
                "asked_h": sum(job["runtime"] * job.get("parts", 1) for job in values) / 60,
                "floor_h": None if None in floors else sum(floors) / 60,
            }
        )
    return rows


def source_gb(catalogue: dict) -> dict[str, float]:
    """Each source's size in GB: its downloads' ``size``, its hub repositories' ``parameters`` in float32
    (their folders hold at least that), a manual source's ``disk_gb``; None where nothing states it."""
    sizes = {}
    for name, entry in catalogue.items():
        if "http" in entry and all("size" in item for item in entry["http"]):
            sizes[name] = sum(item["size"] for item in entry["http"]) / 1e9
        elif "hub" in entry and all("parameters" in item for item in entry["hub"] if "allow" not in item):
            sizes[name] = sum(4 * item["parameters"]["loaded"] for item in entry["hub"] if "parameters" in item) / 1e9
        else:
            sizes[name] = entry.get("disk_gb")
    return sizes


def disk_rows(jobs: dict[str, list[dict]], sources: dict[str, float | None]) -> list[tuple[str, float]]:
    """The disk at the run's peak, GB: sources, each GPU rule's kept outputs over 1 GB, every scratch at once."""
    known = [size for size in sources.values() if size is not None]
    unsized = sorted(name for name, size in sources.items() if size is None)
    rows = [
        (f"sources ({len(known)} sized" + (f"; not sized: {', '.join(unsized)}" if unsized else "") + ")", sum(known))
    ]
    written = {rule: sum(job.get("written_mb", 0) for job in values) / 1024 for rule, values in jobs.items()}
    rows += [(f"`{rule}` outputs", gb) for rule, gb in sorted(written.items()) if gb >= 1]
    scratch = {rule: sum(job.get("scratch_mb", 0) for job in values) / 1024 for rule, values in jobs.items()}
    rows += [(f"`{rule}` scratch, every job at once", gb) for rule, gb in sorted(scratch.items()) if gb >= 1]
    return rows


def disk_markdown(rows: list[tuple[str, float]]) -> str:
    lines = ["| on disk | GB |", "|---|---:|"] + [f"| {what} | {gb:,.0f} |" for what, gb in rows]
    total = math.ceil(sum(gb for _, gb in rows))
    return "\n".join([*lines, f"| **at the peak, at most** | **{total:,}** |"])


def markdown(rows: list[dict], site: str) -> str:
    """The bill as a Markdown table with its totals and how it was made."""
    lines = [
        "| rule | jobs | GPU memory, GB | host memory, GB | longest job, h | GPU-h asked | GPU-h floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        gpu = f"{row['gpu_gb']:.1f}" if row["gpu_gb"] else "not sized"
        floor = "not sized" if row["floor_h"] is None else f"{row['floor_h']:,.1f}"
        lines.append(
            f"| `{row['rule']}` | {row['jobs']} | {gpu} | {row['host_gb']:.1f} | {row['longest_h']:.1f} "
            f"| {row['asked_h']:,.1f} | {floor} |"
        )
    asked, floor = sum(row["asked_h"] for row in rows), sum(row["floor_h"] or 0 for row in rows)
    lines.append(f"| **total** | {sum(row['jobs'] for row in rows)} | | | | **{asked:,.0f}** | **{floor:,.0f}** |")
    note = (
        f"Planned by `tools/cluster_bill.py` from `config/paper.yaml` on {site}: GPU-hours asked are the jobs' "
        "`runtime` (x 3 the time of their FLOPs and, for small models, their steps, plus reading the weights: "
        "`condeval.core.resources`), each part of work split by the partition's time limit counted as a job; "
        f"the floor is their FLOPs at 40% of the card's bf16 peak, an estimate no GPU has measured. Goal: "
        f"{GOAL_GPU_HOURS} H100 GPU-hours."
    )
    if any(row["floor_h"] is None for row in rows):
        note += " Rules marked *not sized* still ask fixed resources."
    return "\n".join([*lines, "", note])


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the cluster_bill block of docs/cluster.md")
    parser.add_argument("--config", nargs="*", default=[], help="KEY=VALUE overrides, as snakemake --config")
    args = parser.parse_args(argv)
    stdout = dry_run(args.config)
    site = next((item.split("=", 1)[1] for item in args.config if item.startswith("cluster=")), "an H100-80GB")
    jobs = gpu_jobs(stdout)
    catalogue = yaml.safe_load((ROOT / "config/sources.yaml").read_text())["sources"]
    disk_note = (
        "Disk: the sources as the catalogue states them (hub checkpoints as their parameters in float32), "
        "the outputs GPU jobs keep, images counted as raw pixels (a PNG takes about half), and the training "
        "row caches, each removed when its generator is saved."
    )
    table = "\n\n".join(
        [markdown(bill_rows(jobs), site), disk_markdown(disk_rows(jobs, source_gb(catalogue))), disk_note]
    )
    if args.write:
        write_docs(ROOT / "docs", {"cluster_bill": table})
    else:
        print(table)
    return table


if __name__ == "__main__":
    main()
