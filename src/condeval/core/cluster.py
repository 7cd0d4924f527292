"""Checks of a cluster run's resources, before any job is submitted (the workflow's ``onstart``).

``profiles/slurm`` holds the site values a lab must set (account, partitions) as :data:`PLACEHOLDER`;
a run that would submit a job with one left is refused, naming each. A rule whose code uses a GPU
when granted one declares a ``gpu`` resource (0 on a CPU); on a cluster such a job granted no GPU
(``gpu`` 0 and no GPU ``gres``: e.g. after a command-line ``--set-resources`` replaced the
profile's GPU block) would run on the node's CPU for days, so it is refused too, unless the config
says ``gpu_rules_on_cpu: true`` (a miniature on CPU nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["PLACEHOLDER", "ClusterJob", "cluster_refusals"]

#: The value of a site setting the lab has not set yet (profiles/slurm/config.yaml).
PLACEHOLDER = "SET-ME"


@dataclass(frozen=True)
class ClusterJob:
    """What the check reads of one job: its rule, its evaluated resources, whether the rule uses a GPU."""

    rule: str
    resources: Mapping[str, object]
    uses_gpu: bool


def _granted_gpu(resources: Mapping[str, object]) -> bool:
    gpus = resources.get("gpu", 0)
    return (isinstance(gpus, int) and gpus > 0) or "gpu" in str(resources.get("gres", "")).lower()


def cluster_refusals(jobs: Iterable[ClusterJob], gpu_rules_on_cpu: bool = False) -> list[str]:
    """Why a cluster run must not start: one line per problem, none when it may.

    Parameters
    ----------
    jobs : iterable of ClusterJob
        The jobs the run submits (not its local rules).
    gpu_rules_on_cpu : bool
        The config's ``gpu_rules_on_cpu``: GPU rules may run without a GPU.
    """
    jobs = list(jobs)
    unset = sorted(
        {
            f"{name}={value}"
            for job in jobs
            for name, value in job.resources.items()
            if isinstance(value, str) and PLACEHOLDER in value
        }
    )
    lines = []
    if unset:
        lines.append(
            f"the cluster profile's site values are not set ({', '.join(unset)}): set your account and partitions "
            f"in profiles/slurm/config.yaml (or your own profile), where they read {PLACEHOLDER}"
        )
    without = sorted({job.rule for job in jobs if job.uses_gpu and not _granted_gpu(job.resources)})
    if without and not gpu_rules_on_cpu:
        lines.append(
            f"{len(without)} rule(s) that use a GPU would run without one ({', '.join(without)}): give them gpu=1 "
            "(profiles/slurm's GPU block; a command-line --set-resources replaces that block, so repeat it there), "
            "or run them on CPUs on purpose with --config gpu_rules_on_cpu=True"
        )
    return lines
