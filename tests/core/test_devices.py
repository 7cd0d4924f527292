"""Jobs that only run models start without Lightning; the Snakefile reads the job environment without torch."""

import subprocess
import sys

import pytest

# The modules behind the feature-extraction, generation and attention-mask sampling jobs.
MODEL_ONLY = (
    "condeval.core.devices",
    "condeval.encoders.features",
    "condeval.generators.captioners",
    "condeval.crc.sampling",
    "condeval.datasets.coco",
)


def _imported_after(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return set(result.stdout.split())


@pytest.mark.slow
def test_model_only_jobs_do_not_import_lightning():
    imported = _imported_after("; ".join(f"import {m}" for m in MODEL_ONLY))
    assert {"pytorch_lightning", "lightning_fabric"}.isdisjoint(imported)
    assert "torch" in imported  # the check can see an import at all


@pytest.mark.slow
def test_job_environment_reads_without_torch():
    assert "torch" not in _imported_after("from condeval.core.devices import JOB_ENVIRONMENT")


def test_job_environment_keeps_dqr_activations_in_the_heap():
    from condeval.core.devices import JOB_ENVIRONMENT

    dqr_step_activation = 256 * 1024 * 64 * 4  # batch x directions x width, float32
    for variable in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        assert int(JOB_ENVIRONMENT[variable]) > dqr_step_activation
