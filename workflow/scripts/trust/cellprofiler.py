"""Snakemake adapter: CellProfiler 4.2.8 headless (`-c -r -p`) on one shard; the output appears whole.

It runs in CellProfiler's own environment (envs/cellprofiler.yaml), so it uses the standard library
only. The configured program and pipeline are resolved here, not in the rule: a relative path that
names nothing in the working directory is the repository's (its .cellprofiler venv, its pipelines), so
the same run copied elsewhere (a lab member's clone, a DVC pull) has the same params and reruns nothing.
"""

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
p = snakemake.params  # noqa: F821 (Snakemake's script object)


def resolved(path: str) -> str:
    if Path(path).is_absolute() or Path(path).exists() or "/" not in path:
        return path  # a bare program name is left to PATH
    return str(REPO / path)


partial = Path(p.partial)
shutil.rmtree(partial, ignore_errors=True)
images = snakemake.input.images.removesuffix(".sha256")  # noqa: F821 (the folder its manifest stands for)
argv = [resolved(p.cellprofiler), "-c", "-r", "-p", resolved(p.pipeline), "-i", images, "-o", str(partial)]
with open(snakemake.log[0], "w") as log:  # noqa: F821
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    try:
        done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
    except FileNotFoundError:
        message = (
            f"CellProfiler not found: {argv[0]!r} is no program on PATH (config key trust.morphology.cellprofiler; "
            "`make cellprofiler` builds .cellprofiler/bin/cellprofiler, envs/cellprofiler.yaml under --sdm conda)"
        )
        log.write(message + "\n")
        raise SystemExit(message) from None
if done.returncode != 0 or not (partial / "Image.csv").is_file():
    raise RuntimeError(f"CellProfiler failed (exit {done.returncode}); see {snakemake.log[0]}")  # noqa: F821
(partial / "Image.csv").replace(snakemake.output.table)  # noqa: F821
shutil.rmtree(partial)
