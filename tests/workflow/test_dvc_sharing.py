"""Lab sharing: a run pushed with DVC and pulled into a fresh clone is "Nothing to be done"."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(args, cwd, timeout=600):
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _snakemake(workdir, *args):
    return _run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2",
         "--max-checksum-file-size", "1GB", *args],
        cwd=workdir,
    )  # fmt: skip


def _git(cwd, *args):
    return _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd)


def _dvc(cwd, *args):
    return _run([sys.executable, "-m", "dvc", *args], cwd=cwd)


def test_pulled_run_needs_no_rerun_and_alpha_edit_still_reruns(tmp_path):
    lab, colleague, remote = tmp_path / "lab", tmp_path / "colleague", tmp_path / "remote"
    (lab / "config").mkdir(parents=True)
    shutil.copy(REPO / ".test/config/config.yaml", lab / "config/config.yaml")
    shutil.copy(REPO / ".gitignore", lab / ".gitignore")
    _git(lab, "init", "-q")
    _dvc(lab, "init", "-q")
    _dvc(lab, "remote", "add", "-d", "lab", str(remote))
    _snakemake(lab)
    _dvc(lab, "add", "data", "results", "reports")
    _dvc(lab, "push")
    _git(lab, "add", ".")
    _git(lab, "add", "-f", ".snakemake/metadata")
    _git(lab, "commit", "-qm", "shared run")

    _git(tmp_path, "clone", "-q", str(lab), str(colleague))
    _dvc(colleague, "pull")
    dry = _snakemake(colleague, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]

    config = yaml.safe_load((colleague / "config/config.yaml").read_text())
    config["crel"]["calibration"]["alphas"].append(0.05)
    (colleague / "config/config.yaml").write_text(yaml.safe_dump(config))
    dry = _snakemake(colleague, "-n")
    out = dry.stdout
    assert "evaluate_crel" in out and "train_vae" not in out and "train_dqr" not in out, out[-3000:]
