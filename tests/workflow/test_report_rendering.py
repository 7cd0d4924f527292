"""Every report caption renders without a docutils system message.

A caption that docutils cannot parse does not stop ``snakemake --report``: the error is printed into
report.html as a "System Message" box (e.g. ``|μ − human|`` read as a substitution reference). Here
every caption of the tiny configs' jobs (every target rule: all tracks, ablations, scaling study) goes through
Snakemake's own caption rendering (``FileRecord.render``: the caption file, Jinja with the job's
params and wildcards, then docutils' HTML writer), without running the jobs.
"""

from pathlib import Path

import pytest
from conftest import REPO
from jinja2 import Environment

CONFIGS = ("config", "i2t", "t2i", "crc", "trust")
# Snakemake appends link targets to every caption; the file and category links of a real report need
# finished outputs, and no caption uses them (a caption that did would fail here, loudly).
RST_LINKS = "\n\n.. _Workflow: javascript:show_panel('workflow')\n.. _Statistics: javascript:show_panel('statistics')\n"


def planned_jobs(api, workdir: Path) -> list:
    """The jobs of every target rule (a rule without outputs: all, ablations, ...) on the tiny configs.

    Every job is planned (forceall): nothing has to exist.
    """
    from snakemake.settings.types import ConfigSettings, DAGSettings, ResourceSettings, StorageSettings

    workflow_api = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        storage_settings=StorageSettings(),
        config_settings=ConfigSettings(configfiles=[REPO / f".test/config/{name}.yaml" for name in CONFIGS]),
        snakefile=REPO / "workflow/Snakefile",
        workdir=workdir,
    )
    targets = {rule.name for rule in workflow_api._workflow.rules if not rule.output}
    workflow_api.dag(dag_settings=DAGSettings(targets=targets, forceall=True))
    workflow = workflow_api._workflow
    workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
    workflow._build_dag()
    return list(workflow.dag.jobs)


def render_caption(job, caption) -> str:
    """The HTML Snakemake's report shows for ``caption`` (a SourceFile) of an output of ``job``."""
    from snakemake.report import FileRecord

    record = object.__new__(FileRecord)  # its constructor reads the output file, which need not exist
    record.job, record.raw_caption, record.wildcards_overwrite = job, caption, None
    record.render(Environment(trim_blocks=True, lstrip_blocks=True), RST_LINKS, {}, [])
    return record.caption


def report_items(jobs):
    """(rule, output, caption SourceFile) of every output marked for the report."""
    from snakemake.io import get_flag_value, is_flagged

    return [
        (job.rule.name, str(output), get_flag_value(output, "report").caption)
        for job in jobs
        for output in job.output
        if is_flagged(output, "report") and get_flag_value(output, "report").caption is not None
    ]


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings

    with SnakemakeApi(OutputSettings()) as api:
        yield planned_jobs(api, tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def captions(planned):
    """(rule, output, caption file, HTML) of every report item."""
    return [
        (rule, output, Path(str(caption)), render_caption(job, caption))
        for job in planned
        for rule, output, caption in report_items([job])
    ]


@pytest.mark.slow
def test_every_caption_file_is_rendered(captions):
    rendered = {path.resolve() for _, _, path, _ in captions}
    unused = sorted(
        str(path.relative_to(REPO)) for path in (REPO / "workflow/report").rglob("*.rst") if path not in rendered
    )
    assert not unused, f"no job of the tiny configs' targets shows these captions: {unused}"


@pytest.mark.slow
def test_no_caption_renders_a_docutils_system_message(captions):
    broken = [
        f"{rule} -> {output}: {path.resolve().relative_to(REPO)}\n{html}"
        for rule, output, path, html in captions
        if "system-message" in html
    ]
    assert not broken, "\n\n".join(broken)


@pytest.mark.slow
def test_a_bar_pair_in_a_caption_shows_up_as_a_system_message(planned, tmp_path):
    """The check above sees the failure it guards against (Table 5's ``|μ − human|`` before its fix)."""
    from snakemake.sourcecache import LocalSourceFile

    job = next(job for job in planned if report_items([job]))
    bad = tmp_path / "bad.rst"
    bad.write_text("UPS: Pearson correlation of |μ − human| and σ.\n")
    good = tmp_path / "good.rst"
    good.write_text("UPS: Pearson correlation of \\|μ − human\\| and σ; α = {{ snakemake.rule }}.\n")
    assert "system-message" in render_caption(job, LocalSourceFile(str(bad)))
    html = render_caption(job, LocalSourceFile(str(good)))
    assert "system-message" not in html and "|μ − human|" in html and job.rule.name in html


@pytest.mark.slow
def test_every_report_item_names_its_subcategory(planned):
    """Snakemake files an item without a subcategory under "Other" in its category: every table and figure
    is listed under the paper table or figure it reproduces instead."""
    from snakemake.io import get_flag_value, is_flagged

    unfiled = sorted(
        {
            f"{job.rule.name} -> {output}"
            for job in planned
            for output in job.output
            if is_flagged(output, "report") and not get_flag_value(output, "report").subcategory
        }
    )
    assert not unfiled, f"report items without a subcategory: {unfiled}"
