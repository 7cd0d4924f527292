"""The paper config rehearsed: every rule of `config/paper.yaml`'s DAG runs, on data in the real formats at the
real shapes and on checkpoints of the real classes laid out as the hub's, fetched through the paper config's
own fetch rules from a loopback mirror and hub (condeval.rehearsal, `make rehearse`)."""

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_bounded

pytestmark = pytest.mark.slow  # the whole paper DAG
#: Seconds of 2 idle cores the rehearsal may take, install excluded (the issue's budget: 10 minutes of CI).
BUDGET_S = 600


def _plan_paper_dag(workdir: Path) -> subprocess.Popen:
    """A dry run of the paper config from an empty folder, started (it runs beside the rehearsal's data writing)."""
    command = [
        sys.executable,
        "-m",
        "snakemake",
        *_targets(),
        "-s",
        str(REPO / "workflow/Snakefile"),
        "-d",
        str(workdir),
        "-n",
        "--quiet",
        "rules",
        "--configfile",
        str(REPO / "config/paper.yaml"),
        str(REPO / "config/allow_pickles.yaml"),
        "--config",
        "check_inputs=False",
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _paper_dag_rules(plan: subprocess.Popen) -> set[str]:
    """The rules the paper config's dry run planned: every rule of its DAG."""
    stdout, stderr = plan.communicate(timeout=300)
    assert plan.returncode == 0, stderr[-3000:]
    rules = set(re.findall(r"^(\w+)\s+\d+$", stdout, flags=re.M)) - {"total", "job"}
    return rules - _placed_by_hand()


def _targets() -> tuple[str, ...]:
    from condeval.rehearsal.run import DEFAULT_TARGETS

    return DEFAULT_TARGETS


def _placed_by_hand() -> set[str]:
    """The fetch rules of manual sources: a lab places those files by hand, as the rehearsal does; their rules run
    only to refuse a missing one."""
    import yaml

    from condeval.core.fetch import read_catalog, resolve_sources

    config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    catalogue = read_catalog(REPO / "config/sources.yaml")
    return {f"fetch_{source.name}" for source in resolve_sources(catalogue, config) if source.kind == "manual"}


#: The logs of the jobs that load a hub checkpoint on a GPU (config/rehearsal.yaml runs each in bfloat16).
CHECKPOINT_LOGS = (
    "crel_t2i/generate_*.log",
    "crel_i2t/generate_*.log",
    "shared/features/*/*/shard-*.log",
    "crc/sample_*.log",
    "trust/real_features_*.log",
    "trust/sample_features_*.log",
)


def _precisions(logs: Path) -> dict[str, list[str]]:
    """Each checkpoint-loading job's log → the precisions its loaded weights were in (``weights in ...``)."""
    files = [file for pattern in CHECKPOINT_LOGS for file in sorted(logs.glob(pattern))]
    return {
        str(file.relative_to(logs)): re.findall(r": weights in (.+)$", file.read_text(), flags=re.M) for file in files
    }


def test_every_rule_of_the_paper_dag_runs_at_the_real_shapes(tmp_path):
    started = time.perf_counter()
    plan = _plan_paper_dag(tmp_path / "dry")
    result = run_bounded(
        [sys.executable, str(REPO / "tools/rehearse.py"), str(tmp_path / "run"), "--cores", "2"], budget_s=BUDGET_S
    )
    elapsed = time.perf_counter() - started
    expected = _paper_dag_rules(plan)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    executed = set(re.findall(r"^(?:local)?rule (\w+):$", output, flags=re.M))
    jobs = len(re.findall(r"^(?:local)?rule \w+:$", output, flags=re.M))
    print(f"rehearsal: {len(executed)} rules ({jobs} jobs) of the paper DAG's {len(expected)} in {elapsed:.0f} s")
    assert executed == expected, (
        f"not run: {sorted(expected - executed)}; not in the paper DAG: {sorted(executed - expected)}"
    )
    precisions = _precisions(tmp_path / "run" / "logs")
    assert len(precisions) > 40 and all(precisions.values()), f"jobs that logged no weights: {precisions}"
    wrong = {log: found for log, found in precisions.items() if set(found) != {"bfloat16"}}
    assert not wrong, f"checkpoints not in the configured bfloat16: {wrong}"
    report = tmp_path / "run" / "reports" / "report.html"
    assert report.is_file() and report.stat().st_size > 100_000
