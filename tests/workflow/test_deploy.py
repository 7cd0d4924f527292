"""The workflow as a Snakemake module of a lab's own project (snakedeploy's layout), run to the end.

The project holds only its Snakefile and its config: `module condeval: snakefile: <checkout>/workflow/Snakefile`,
`config: config`, `use rule * from condeval` (what `snakedeploy deploy-workflow` writes, with a local path in
place of github(..., tag=...)). Everything the workflow reads of itself (schemas, the catalogue, its resources)
it finds through the module, everything it writes lands in the project.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_bounded, tiny_config

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a whole (tiny) run

PROJECT_SNAKEFILE = f"""\
configfile: "config/config.yaml"


module condeval:
    snakefile:
        "{REPO}/workflow/Snakefile"
    config:
        config


use rule * from condeval as condeval_*
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A lab's project using the workflow as a module, with the tiny CReL config, run to the end."""
    project = tmp_path_factory.mktemp("lab_project")
    (project / "config").mkdir()
    (project / "config/config.yaml").write_text(yaml.safe_dump(tiny_config()))
    (project / "Snakefile").write_text(PROJECT_SNAKEFILE)
    result = run_bounded(
        [
            sys.executable,
            "-m",
            "snakemake",
            "condeval_all",
            "--cores",
            "2",
            "--workflow-profile",
            "none",
            "--rerun-incomplete",
        ],
        budget_s=900,
        cwd=project,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return project


def test_a_project_runs_the_workflow_as_a_module_to_the_end(project):
    tables = sorted(path.relative_to(project) for path in (project / "reports").rglob("*.csv"))
    assert tables, "no report table"
    assert not (REPO / "results").exists() or not any(
        path.stat().st_mtime > (project / "Snakefile").stat().st_mtime for path in (REPO / "results").rglob("*")
    ), "the module wrote into the checkout"


def test_the_module_run_is_up_to_date_afterwards(project):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "condeval_all", "-n", "--workflow-profile", "none"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr, result.stdout[-2000:]
