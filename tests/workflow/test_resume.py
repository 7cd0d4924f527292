"""A training job that fails keeps its checkpoints, and the rerun continues from them.

Snakemake deletes the outputs of a job that fails (a crash, a node's OOM killer, a SLURM time limit),
and rolls an ``update()`` output back to its state before the attempt; so the run folder
(``<model>_run``: checkpoints, CSV logs) is no declared output of any training rule (docs/workflow.md,
"A killed run").
"""

import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml
from conftest import REPO, run_snakemake, tiny_config

EPOCHS = 60  # long enough that the first checkpoint comes well before the end
TARGET = "results/trust/celeba/extractors/clip"


def _kill_the_job(snakemake: subprocess.Popen) -> None:
    """SIGKILL every process Snakemake started (the job), as an OOM killer would; Snakemake itself lives on."""
    for child in psutil.Process(snakemake.pid).children(recursive=True):
        child.send_signal(signal.SIGKILL)


def test_a_failed_training_job_keeps_its_checkpoint_and_the_rerun_resumes_from_it(tmp_path):
    config = tiny_config("trust")
    config["trust"]["clip"]["train"]["epochs"] = EPOCHS
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    checkpoint = tmp_path / f"{TARGET}_run/checkpoints/last.ckpt"
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "workflow/Snakefile"),
        "-d",
        str(tmp_path),
        "--cores",
        "1",
        TARGET,
        "--configfile",
        str(tmp_path / "config/config.yaml"),
    ]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not checkpoint.exists():
        first.kill()
        pytest.fail(
            f"no checkpoint was written before the run ended or 300 s passed:\n{first.communicate()[0][-3000:]}"
        )
    _kill_the_job(first)
    output, _ = first.communicate(timeout=120)
    if (tmp_path / TARGET).exists():
        pytest.fail(f"the job ended before it was killed; raise EPOCHS ({EPOCHS}):\n{output[-2000:]}")
    assert first.returncode != 0 and "Error in rule trust_train_clip" in output, output[-3000:]
    assert checkpoint.exists(), f"the failed job's checkpoint is gone:\n{output[-3000:]}"

    again = run_snakemake(tmp_path, TARGET, configs=("config/config.yaml",), budget_s=300)
    assert again.returncode == 0, again.stderr[-3000:]
    epochs = [
        int(e)
        for e in re.findall(rf"epoch (\d+)/{EPOCHS}:", (tmp_path / "logs/trust/train_clip_celeba.log").read_text())
    ]
    assert epochs[0] > 1 and epochs[-1] == EPOCHS, f"the rerun trained epochs {epochs[0]}..{epochs[-1]}"
