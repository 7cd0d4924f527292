# Raw data in (config `fetch:`): one localrule `fetch_<name>` per source of the catalogue that
# `fetch.sources` names (config/sources.yaml), writing exactly the paths the config holds at the
# source's keys, so a run from an empty tree schedules these first. They run on the submitting
# (login) node, the one with a network. The offline default has no `fetch:` section: no rule here.
#
# A source the catalogue does not pin is locked by its first fetch in the lock folder `fetch.lock`
# (config/sources.lock/<name>.yaml by default; commit it) and fetched as locked afterwards.
# Before any job starts (onstart: not in a dry run), the sources of the fetch jobs this run will
# execute are checked at once: if any is manual, locked for another catalogue entry, gated without a
# Hugging Face token, or its host does not answer, or if a job of the run names (in its params) a missing source no job writes, the run
# stops with ONE message listing each (and every other missing source) with where to place it. A preflight job would not do: a job every fetch rule waits for would rerun
# present sources' rules whenever it ran.
from condeval.core import fetch as fetch_sources  # noqa: E402

if "fetch" in config:
    FETCH = config["fetch"]
    FETCH_CATALOG_FILE = repository_path(FETCH["sources"])  # the project's own copy, else the workflow's
    FETCH_LOCK_DIR = FETCH.get("lock", "config/sources.lock")  # the project's, like every path of the config
    FETCH_CATALOG = fetch_sources.read_catalog(FETCH_CATALOG_FILE, workflow_file("schemas/sources.schema.yaml"))
    MODEL_PARAMETERS.update(fetch_sources.model_parameters(FETCH_CATALOG))
    FETCH_SOURCES = {
        f"fetch_{source.name}": source
        for source in fetch_sources.resolve_sources(FETCH_CATALOG, config, FETCH_CATALOG_FILE)
    }

    def fetch_preflight(log):
        """onstart: refuse, in one message, the sources this run needs and cannot get now."""
        jobs = list(workflow.dag.needrun_jobs())
        scheduled = {job.rule.name for job in jobs}
        needed = [source for rule, source in FETCH_SOURCES.items() if rule in scheduled]
        absent = [source for rule, source in FETCH_SOURCES.items() if rule not in scheduled and source.missing()]
        # An image folder is a job's parameter, not its input: a job naming it needs it though no job writes it.
        unscheduled = fetch_sources.named_by(
            absent, (str(list(job.params)) for job in jobs if job.rule.name not in FETCH_SOURCES)
        )
        others = [source for source in absent if source not in unscheduled]
        if needed or unscheduled:
            fetch_sources.run_preflight(
                needed,
                others,
                "logs/fetch/preflight.log",
                FETCH.get("mirror") or None,
                unscheduled,
                FETCH_LOCK_DIR,
            )

    ONSTART_CHECKS.append(fetch_preflight)

    for _rule, _source in FETCH_SOURCES.items():

        rule:
            name:
                _rule
            output:
                *_source.files,
                *[directory(folder) for folder in _source.folders],
            log:
                f"logs/fetch/{_source.name}.log",
            localrule: True
            conda:
                "../../../envs/torch.yaml"
            params:
                # the source's pin and paths, nothing of where the checkout is: a new pin refetches, a clone
                # elsewhere (a lab member's, after a DVC pull) fetches nothing again
                source=_source.as_params(),
                lock=FETCH_LOCK_DIR,
            script:
                "../../scripts/shared/fetch.py"
