"""An invalid config is refused before any job starts, and the error names the key."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _dry_run(tmp_path, mutate):
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    mutate(config)
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        SNAKEMAKE + ["-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1", "-n"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_valid_test_config_dry_runs(tmp_path):
    result = _dry_run(tmp_path, lambda c: None)
    assert result.returncode == 0, result.stderr
    assert "train_vae" in result.stdout


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["calibration"].update(alphas=[0.1, 1.5]), "alphas"),
        (lambda c: c["calibration"].update(alphas=[0.0]), "alphas"),
        (lambda c: c["lgm"].update(metric="hamming"), "metric"),
        (lambda c: c["lgm"].pop("beta"), "beta"),
        (lambda c: c["synthetic"]["splits"].update(test=0.3), "synthetic.splits"),
        (lambda c: c.update(unknown_key=1), "unknown_key"),
        (lambda c: c["calibration"].update(alphas=[0.001]), "calibration.alphas"),
        (lambda c: c["lgm"].update(kind="gan"), "kind"),
        (lambda c: c["diffusion"].update(inference_steps=0), "inference_steps"),
        (lambda c: c["ablations"].update(mae_alphas=[0.1, 0.002]), "ablations.mae_alphas"),
        (lambda c: c["ablations"].update(checkpoint_epochs=[1, 99]), "ablations.checkpoint_epochs"),
    ],
)
def test_invalid_config_is_refused_naming_the_key(tmp_path, mutate, key):
    result = _dry_run(tmp_path, mutate)
    assert result.returncode != 0
    assert key in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()
