"""`snakemake --profile slurm` on a real single-node SLURM cluster on localhost (tools/slurm-localhost.sh).

On a copy of the session's local run of the tiny config (conftest ``tiny_run``), the CReL reliability table's last two
levels rerun through sbatch; every job must have gone through SLURM, the table must be byte-identical to the local
run's, a job that fails must fail the run in bounded time, and the
daemons started here must be stopped by their PIDs. Needs root and SLURM's Debian packages
(`make slurm-deps`); when the cluster cannot start, the tests fail with the reason, they never skip.
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
from conftest import copy_run

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools/slurm-localhost.sh"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# Tables with wall-clock or memory columns: compared for presence only.
TIMING_TABLES = {"lgm_cost.csv"}
# Rules that profiles/slurm sends to its GPU partition. The localhost cluster's GPU is fake (no CUDA),
# so the test keeps their code on the CPU (gpu=0) and asks SLURM for the GPU with --gres instead:
# what is checked is that they land on the GPU partition with a GPU allocated.
GPU_RULES = set(yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())["set-resources"])
GPU_RULE = "crel_reliability"  # the rule SLURM reruns: a GPU rule
# What is sent through SLURM: on a copy of the session's local run, the CReL reliability table's last two
# levels, FORCED (crel_reliability x 2 on the GPU partition, then reliability_table on the CPU one: 3 jobs).
# Each SLURM job costs about 20 s of submission, start-up and polling whatever it computes, so the table's
# whole 10-job chain (9 levels) took 193 s on idle cores and the whole tiny DAG (31 jobs) 334 s; both
# partitions, the GPU request, the byte-identical table and the failure path are exercised by these 3.
SLURM_TARGET = "reports/crel/nonlinear/reliability.csv"
FORCED = "crel_reliability"

pytestmark = pytest.mark.slow

SUBMITTED = re.compile(r"^Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (.+)\)\.$", re.M)


def _tail(text, n=4000):
    return text[-n:] if text else ""


def _run(args, cwd, env, timeout):
    start = time.monotonic()
    try:
        result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x for x in (exc.stdout, exc.stderr) if x)
        pytest.fail(f"{args} did not finish within {timeout}s (hung?)\n{_tail(out)}")
    return result, time.monotonic() - start


def _pids(state_dir):
    return {p.stem: int(p.read_text()) for p in (state_dir / "pids").glob("*.pid")}


def _alive(pid, name):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in (name, f"{name}-wlm")
    except OSError:
        return False


def _jobs_by_kind(log):
    """(remote, local): Snakemake job id -> rule name, from the `rule X:` / `localrule X:` blocks."""
    remote, local, current = {}, {}, None
    for line in log.splitlines():
        match = re.match(r"^(localrule|rule) (\w+):$", line)
        if match:
            current = match.groups()
            continue
        match = re.match(r"^\s+jobid: (\d+)$", line)
        if match and current:
            (local if current[0] == "localrule" else remote)[int(match.group(1))] = current[1]
            current = None
    return remote, local


def _slurm_jobs(env):
    """SLURM job id -> scontrol fields of every job the controller still knows (MinJobAge is an hour)."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    jobs = {}
    for line in out.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in fields:
            jobs[fields["JobId"]] = fields
    return jobs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_CONF": str(state_dir / "etc/slurm.conf")}
    started = time.monotonic()
    result, _ = _run(["bash", str(SCRIPT), "start", str(state_dir)], REPO, env, timeout=240)
    start_s = time.monotonic() - started
    info = {"dir": state_dir, "env": env, "pids": _pids(state_dir), "start_s": start_s, "timings": {}}
    try:
        if result.returncode != 0:
            pytest.fail(
                f"the localhost SLURM cluster did not start (root and `make slurm-deps` needed):\n"
                f"{_tail(result.stdout)}\n{_tail(result.stderr)}"
            )
        assert set(info["pids"]) == {"munged", "slurmctld", "slurmd"}, info["pids"]
        yield info
    finally:
        stop, _ = _run(["bash", str(SCRIPT), "stop", str(state_dir)], REPO, env, timeout=120)
        print(
            f"\nSLURM timings: cluster start {start_s:.1f}s, "
            + ", ".join(f"{k} {v}" for k, v in info["timings"].items())
        )
        assert stop.returncode == 0, stop.stderr
        left = {name: pid for name, pid in info["pids"].items() if _alive(pid, name)}
        assert not left, f"daemons still running after stop: {left}"


def _site_values() -> list[str]:
    """The localhost cluster's account and partitions, which profiles/slurm leaves for a lab to set."""
    gpu = (
        f"{rule}:{assign}"
        for rule in sorted(GPU_RULES)
        for assign in ("gpu=0", "gres='gpu:1'", "slurm_partition='gpu'")
    )
    return ["--default-resources", "slurm_account=localtest", "slurm_partition=localtest", "--set-resources", *gpu]


@pytest.fixture(scope="module")
def runs(tiny_run, cluster, tmp_path_factory):
    """The reliability table's last two levels rerun through SLURM (profile by path, run from the workdir)
    on a copy of the session's local run (conftest's ``tiny_run``), and that local run to compare with."""
    env = cluster["env"]
    slurm_dir = copy_run(tiny_run, tmp_path_factory.mktemp("slurm_run"))
    result, wall_s = _run(
        SNAKEMAKE
        + [
            "-s",
            str(REPO / "workflow/Snakefile"),
            "-d",
            str(slurm_dir),
            "--profile",
            str(REPO / "profiles/slurm"),
            "--slurm-init-seconds-before-status-checks",
            "5",
            "--forcerun",
            FORCED,
            *_site_values(),
            "--",
            SLURM_TARGET,
        ],
        slurm_dir,
        env,
        timeout=1500,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, _tail(log, 8000)
    cluster["timings"]["slurm run"] = f"{wall_s:.0f}s"
    return {"slurm": slurm_dir, "local": tiny_run, "log": log, "env": env}


@pytest.mark.parametrize(
    ("site", "refusal"),
    [
        ([], "the cluster profile's site values are not set (slurm_account=SET-ME, slurm_partition=SET-ME)"),
        (
            [
                "--default-resources",
                "slurm_account=localtest",
                "slurm_partition=localtest",
                "--set-resources",
                f"{GPU_RULE}:slurm_partition=gpu",
            ],
            f"1 rule(s) that use a GPU would run without one ({GPU_RULE})",
        ),
        (
            [*_site_values(), "--configfile", "{work}/config/config.yaml", "{work}/short_partition.yaml"],
            "crel_reliability asks 10 min; the partition's limit is 6 min",
        ),
    ],
    ids=["profile-values-unset", "gpu-block-replaced", "beyond-the-time-limit"],
)
def test_a_run_the_cluster_would_misuse_is_refused_before_any_submission(runs, tmp_path, site, refusal):
    """The profile as shipped (SET-ME), a command-line --set-resources that drops a rule's GPU, and a
    partition limit shorter than a job asks (config `cluster`)."""
    work = tmp_path / "work"
    shutil.copytree(runs["slurm"], work, ignore=shutil.ignore_patterns("slurm_logs", "log"))
    (work / "short_partition.yaml").write_text("cluster: {runtime_limit_h: 0.1}\n")  # numbers: --config gives strings
    site = [arg.format(work=work) for arg in site]
    result, _ = _run(
        SNAKEMAKE + ["--profile", "slurm", "-d", str(work), "--forcerun", FORCED, *site, "--", SLURM_TARGET],
        REPO,
        runs["env"],
        timeout=300,
    )
    log = result.stdout + result.stderr
    assert result.returncode != 0 and "the cluster run cannot start" in log and refusal in log, _tail(log)
    assert not SUBMITTED.findall(log), "a job was submitted"


def test_every_job_went_through_sbatch(runs):
    remote, local = _jobs_by_kind(runs["log"])
    submitted = {int(job): slurm_id for job, slurm_id, _ in SUBMITTED.findall(runs["log"])}
    assert remote, _tail(runs["log"])
    assert set(submitted) == set(remote), f"not submitted: {set(remote) - set(submitted)}"
    assert not local, local  # the target is a file: every job is a SLURM job
    assert sorted(remote.values()) == ["crel_reliability", "crel_reliability", "reliability_table"], remote
    slurm = _slurm_jobs(runs["env"])
    states = {submitted[job]: slurm.get(submitted[job], {}).get("JobState") for job in remote}
    assert set(states.values()) == {"COMPLETED"}, states
    for job, rule in remote.items():
        fields = slurm[submitted[job]]
        expected = "gpu" if rule in GPU_RULES else "localtest"
        assert fields["Partition"] == expected and fields["Account"] == "localtest", (rule, fields)
        if rule in GPU_RULES:  # sbatch --gres=gpu:1 on the fake GPU
            assert "gpu:1" in fields.get("TresPerJob", "") + fields.get("TresPerNode", ""), fields
    submits = [fields["SubmitTime"] for fields in (slurm[submitted[job]] for job in remote)]
    ends = [fields["EndTime"] for fields in (slurm[submitted[job]] for job in remote)]
    print(f"\n{len(remote)} SLURM jobs, first submit {min(submits)}, last end {max(ends)}")


def test_tables_match_a_local_run(runs):
    def tables(root):  # the CReL tables: the local run has every track's
        reports = root / "reports/crel"
        return {p.relative_to(reports): p for p in reports.rglob("*") if p.suffix in {".csv", ".md"}}

    slurm, local = tables(runs["slurm"]), tables(runs["local"])
    assert Path(SLURM_TARGET).relative_to("reports/crel") in slurm, sorted(slurm)
    assert (runs["slurm"] / SLURM_TARGET).stat().st_mtime > (runs["local"] / SLURM_TARGET).stat().st_mtime  # rewritten
    differ = [
        str(rel)
        for rel in slurm
        if rel.name not in TIMING_TABLES and slurm[rel].read_bytes() != local[rel].read_bytes()
    ]
    assert not differ, differ


def test_a_failing_job_fails_the_run(runs, tmp_path):
    """Corrupt a data file of a copy of the SLURM run: its consumer reruns through sbatch and fails.

    Run from the repository root with the profile's short name, as docs/workflow.md types it.
    """
    broken = tmp_path / "broken"
    shutil.copytree(runs["slurm"], broken, ignore=shutil.ignore_patterns("slurm_logs", "log"))
    victim = broken / "data/synthetic/nonlinear.parquet"  # the CReL track's data: every track's run was copied
    victim.write_bytes(b"this is not a parquet file\n")
    started = time.monotonic()
    result, wall_s = _run(
        SNAKEMAKE
        + ["--profile", "slurm", "-d", str(broken), "--slurm-init-seconds-before-status-checks", "5", *_site_values()],
        REPO,
        runs["env"],
        timeout=300,
    )
    log = result.stdout + result.stderr
    assert result.returncode != 0, _tail(log)
    assert "Using profiles slurm and workflow specific profile" in log, _tail(log)
    failed = re.findall(r"SLURM-job '(\d+)' failed, SLURM status is: '(\w+)'", log)
    assert failed, _tail(log)
    slurm = _slurm_jobs(runs["env"])
    for slurm_id, status in failed:
        assert status == "FAILED" and slurm[slurm_id]["JobState"] == "FAILED", (slurm_id, status)
    assert "Error in rule" in log and "Finished jobid: 0 (Rule: all)" not in log
    print(f"\nfailing run: {wall_s:.0f}s to a non-zero exit ({time.monotonic() - started:.0f}s with setup)")


def test_stop_ends_the_daemons_by_pid(cluster):
    pids = cluster["pids"]
    assert all(_alive(pid, name) for name, pid in pids.items()), pids
    for _ in range(2):  # idempotent
        result, _ = _run(["bash", str(SCRIPT), "stop", str(cluster["dir"])], REPO, cluster["env"], timeout=120)
        assert result.returncode == 0, result.stderr
    assert not [name for name, pid in pids.items() if _alive(pid, name)]
    assert not list((cluster["dir"] / "pids").glob("*.pid"))
    assert (
        not Path("/etc/slurm/slurm.conf").is_symlink()
        or Path("/etc/slurm/slurm.conf").resolve() != (cluster["dir"] / "etc/slurm.conf").resolve()
    )
    status, _ = _run(["bash", str(SCRIPT), "status", str(cluster["dir"])], REPO, cluster["env"], timeout=60)
    assert status.returncode != 0, status.stdout
