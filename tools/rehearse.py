"""Rehearse the paper config on this machine: its whole DAG on data and checkpoints written here (`make rehearse`).

Writes the raw data and the hub repositories under WORKDIR/.rehearsal/ (kept between runs), serves them
on loopback (a mirror and a Hugging Face hub), pins a copy of config/sources.yaml to them, then runs
Snakemake on config/paper.yaml + config/allow_pickles.yaml + config/rehearsal.yaml in WORKDIR and builds
WORKDIR/reports/report.html (condeval.rehearsal.run):

    python tools/rehearse.py WORKDIR [--seed 0] [--cores 2] [--target all ...] [--dry-run] [--serve-only]
                                     [-- SNAKEMAKE ARGUMENTS]      (e.g. -- --keep-going)

Exits with Snakemake's status.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from condeval.rehearsal.run import DEFAULT_TARGETS, rehearse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path, help="the run's folder (Snakemake's --directory)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the written data and checkpoints")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--target", nargs="+", default=list(DEFAULT_TARGETS), help="Snakemake targets")
    parser.add_argument("--dry-run", action="store_true", help="Snakemake's --dry-run (no report)")
    parser.add_argument("--serve-only", action="store_true", help="prepare and serve until Ctrl-C; no Snakemake")
    argv = sys.argv[1:]
    ours, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    return rehearse(args.workdir, args.seed, args.cores, args.target, args.dry_run, args.serve_only, extra)


if __name__ == "__main__":
    sys.exit(main())
