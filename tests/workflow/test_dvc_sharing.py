"""The lab scenario: member A runs and pushes with DVC; member B clones, pulls and finds nothing to do.

Then B edits alpha (only calibration, evaluation and reports rerun), edits the VAE's beta (the LGM
and everything downstream of it rerun, the data do not), and a corrupted object in B's DVC cache
is refused by DVC before any Snakemake job could read it.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ALL_TRACKS, copy_run, run_bounded, tiny_config

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
pytestmark = pytest.mark.slow

ALPHA_RULES = {
    "evaluate_crel",
    "crel_reliability",
    "evaluate_feldman",
    "evaluate_dqr",
    "evaluate_pcp",
    "table1",
    "coverage_vs_alpha",
    "fig2_regions",
    "reliability_table",
    "all",
}
DATA_RULES = {"generate_synthetic", "split_folds", "preprocess", "output_grid"}
LGM_DOWNSTREAM = {"train_vae", "encode_latents", "train_dqr", "crel_latent_scores", "evaluate_crel"}


def _run(args, cwd, budget_s=900, check=True):
    result = run_bounded(args, budget_s, cwd=cwd, env=ENV)
    if check:
        assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _git(cwd, *args):
    return _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd)


def _dvc(cwd, *args, check=True):
    return _run([str(BIN / "dvc"), *args], cwd=cwd, check=check)


def _plan(cwd):
    """Rule -> job count of a dry run with the project's profile."""
    result = _run([str(BIN / "snakemake"), "--profile", "profiles/local", "-n"], cwd=cwd)
    counts = {}
    for line in result.stdout.split("Job stats:")[-1].splitlines():
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if match and match.group(1) != "total":
            counts[match.group(1)] = int(match.group(2))
    return counts, result.stdout + result.stderr


def _project_copy(dest):
    """The checkout's tracked and untracked-but-not-ignored files, as a new git repository would hold them."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, files.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _edit_config(clone, edit):
    path = clone / "config/config.yaml"
    config = yaml.safe_load(path.read_text())
    edit(config["crel"])
    path.write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def shared_run(tiny_run, tmp_path_factory):
    """Member A: the project with the tiny config (every stage's sections) as its config, run (`make run`),
    then `dvc repro` (which finds nothing to do) and pushed.

    The run is the session's (conftest ``tiny_run``, the same config), copied into the project.
    """
    root = tmp_path_factory.mktemp("lab")
    lab, remote = root / "lab", root / "remote"
    lab.mkdir()
    _project_copy(lab)
    copy_run(tiny_run, lab)
    assert yaml.safe_load((lab / "config/config.yaml").read_text()) == tiny_config(*ALL_TRACKS)
    _git(lab, "init", "-q")
    _git(lab, "add", ".")
    _git(lab, "commit", "-qm", "project")
    _dvc(lab, "remote", "add", "-d", "lab", str(remote))
    _dvc(lab, "repro")
    _dvc(lab, "push")
    _git(lab, "add", ".")
    _git(lab, "commit", "-qm", "shared run")
    status = _git(lab, "status", "--porcelain").stdout
    assert status == "", f"the run left files git would not ignore:\n{status}"
    return root, lab


@pytest.fixture()
def colleague(shared_run, tmp_path):
    root, lab = shared_run
    clone = tmp_path / "colleague"
    start = time.perf_counter()
    _git(tmp_path, "clone", "-q", str(lab), str(clone))
    _dvc(clone, "pull")
    counts, out = _plan(clone)
    clone_to_nothing_s = time.perf_counter() - start
    print(f"git clone -> dvc pull -> 'Nothing to be done': {clone_to_nothing_s:.1f} s")
    assert not counts and "Nothing to be done" in out, out[-3000:]
    return clone


def test_metadata_travels_through_dvc_not_git(shared_run):
    _, lab = shared_run
    tracked = _git(lab, "ls-files").stdout.splitlines()
    assert not [f for f in tracked if f.startswith(".snakemake/")]
    assert ".snakemake/metadata" in (lab / "dvc.lock").read_text()


def test_alpha_edit_reruns_only_calibration_evaluation_and_reports(colleague):
    _edit_config(colleague, lambda c: c["calibration"]["alphas"].append(0.05))
    counts, out = _plan(colleague)
    assert counts and set(counts) <= ALPHA_RULES, counts
    assert counts["evaluate_crel"] == 1, counts


def test_beta_edit_reruns_the_lgm_and_everything_downstream(colleague):
    _edit_config(colleague, lambda c: c["lgm"].update(beta=0.002))
    counts, out = _plan(colleague)
    assert LGM_DOWNSTREAM <= set(counts), counts
    assert not (set(counts) & DATA_RULES), counts
    assert "train_cvae" in counts  # the CVAE shares the VAE's hyperparameters


def _corrupt_largest_cache_object(clone):
    objects = [p for p in (clone / ".dvc/cache").rglob("*") if p.is_file() and not p.name.endswith(".dir")]
    victim = max(objects, key=lambda p: p.stat().st_size)
    victim.chmod(0o644)
    victim.write_bytes(b"corrupted" + victim.read_bytes()[9:])


def _workspace_files(root):
    return {
        p.relative_to(root): p for d in ("data", "results", "reports") for p in (root / d).rglob("*") if p.is_file()
    }


def test_dvc_pull_refuses_a_corrupted_cache_object(shared_run, tmp_path):
    """B's cache was filled earlier and one object got corrupted: `dvc pull` detects it, fetches it
    again, and every file B's Snakemake would read equals A's."""
    _, lab = shared_run
    clone = tmp_path / "colleague"
    _git(tmp_path, "clone", "-q", str(lab), str(clone))
    _dvc(clone, "fetch")
    _corrupt_largest_cache_object(clone)
    pulled = _dvc(clone, "pull")
    assert "fetched" in pulled.stdout, pulled.stdout
    ours, theirs = _workspace_files(clone), _workspace_files(lab)
    assert ours.keys() == theirs.keys()
    assert [name for name in ours if ours[name].read_bytes() != theirs[name].read_bytes()] == []
    assert _dvc(clone, "status", "--quiet", check=False).returncode == 0
    counts, out = _plan(clone)
    assert not counts and "Nothing to be done" in out, out[-3000:]


def test_dvc_status_flags_a_corrupted_object_that_was_checked_out(shared_run, tmp_path):
    """`dvc checkout` alone copies the corrupted bytes, but `dvc status` (run by `make fetch`) flags
    the out as not in the cache, so the run stops before any job reads it."""
    _, lab = shared_run
    clone = tmp_path / "colleague"
    _git(tmp_path, "clone", "-q", str(lab), str(clone))
    _dvc(clone, "fetch")
    _corrupt_largest_cache_object(clone)
    _dvc(clone, "checkout")
    status = _dvc(clone, "status", check=False)
    assert "not in cache" in status.stdout, status.stdout
    assert _dvc(clone, "status", "--quiet", check=False).returncode == 1
