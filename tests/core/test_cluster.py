"""condeval.core.cluster: a cluster run is refused before any job when a site value is unset or a GPU rule has no GPU."""

from condeval.core.cluster import PLACEHOLDER, ClusterJob, cluster_refusals

SITE = {"slurm_account": "lab", "slurm_partition": "cpu"}


def test_a_run_with_its_site_values_set_and_gpus_granted_may_start():
    jobs = [
        ClusterJob("train", {**SITE, "gpu": 1}, True),
        ClusterJob("table", SITE, False),
        ClusterJob("sample", {**SITE, "gpu": 0, "gres": "gpu:a100:1"}, True),
    ]
    assert cluster_refusals(jobs) == []


def test_every_unset_site_value_is_named_once():
    jobs = [
        ClusterJob("train", {"slurm_account": PLACEHOLDER, "slurm_partition": PLACEHOLDER, "gpu": 1}, True),
        ClusterJob("table", {"slurm_account": PLACEHOLDER, "slurm_partition": "cpu"}, False),
    ]
    (line,) = cluster_refusals(jobs)
    assert f"slurm_account={PLACEHOLDER}, slurm_partition={PLACEHOLDER})" in line and "profiles/slurm" in line


def test_a_gpu_rule_granted_no_gpu_is_refused_unless_cpus_are_asked_for():
    jobs = [
        ClusterJob("train", {**SITE, "gpu": 0}, True),
        ClusterJob("generate", SITE, True),
        ClusterJob("table", SITE, False),
    ]
    (line,) = cluster_refusals(jobs)
    assert line.startswith("2 rule(s) that use a GPU would run without one (generate, train)")
    assert "gpu_rules_on_cpu=True" in line
    assert cluster_refusals(jobs, gpu_rules_on_cpu=True) == []
