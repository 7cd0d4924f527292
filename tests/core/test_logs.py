"""Progress bars reach a job's log: under Snakemake stderr is a file, where tqdm hides its bars by default."""

import subprocess
import sys

JOB = """
from condeval.core.logs import log_to_file, progress
log_to_file({log!r})
for _ in progress(range(5), desc="PGD", unit="batch", interval=0):
    pass
for _ in progress(range(5), desc="silent", enabled=False):
    pass
"""


def test_progress_writes_lines_to_the_log_of_a_job(tmp_path):
    log = tmp_path / "job.log"
    subprocess.run([sys.executable, "-c", JOB.format(log=str(log))], check=True, timeout=120)
    lines = [line for line in log.read_text().splitlines() if line.startswith("PGD")]
    assert lines and "5/5" in lines[-1], log.read_text()
    assert "\r" not in log.read_text() and "silent" not in log.read_text()
