"""config/paper.yaml: the whole DAG of every paper target resolves, in a bounded Snakemake time."""
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # starts Snakemake

#: Jobs of `all ablations scaling` under config/paper.yaml; update when the DAG changes on purpose.
EXPECTED_JOBS = 251


def test_paper_config_dry_run_resolves_every_target(tmp_path):
    started = time.perf_counter()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "all", "ablations", "scaling", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1",
         "--configfile", str(REPO / "config/paper.yaml"), "-n", "--quiet", "rules"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    assert result.returncode == 0, result.stderr[-3000:]
    total = re.search(r"^total\s+(\d+)$", result.stdout, flags=re.M)
    assert total, result.stdout[-3000:]
    print(f"config/paper.yaml dry run: {total.group(1)} jobs, {cpu:.1f} s of Snakemake CPU time, {elapsed:.1f} s wall")
    assert int(total.group(1)) == EXPECTED_JOBS
    # CPU time, not wall time: the bound must hold on a loaded CI machine too
    assert cpu < 10, f"the paper config's dry run took {cpu:.1f} s of CPU (goal: under 10 s)"
