# Helpers every track needs. Track helpers live in workflow/rules/<track>/common.smk; input
# functions live there too, as named functions (tests/test_rule_helpers.py holds it).
import functools
import os
import sys
import types
from pathlib import Path

import yaml

from snakemake.utils import min_version, validate

min_version("9.0")

#: This workflow's own folder (workflow/), of this checkout or of the module a lab's project uses. Not
#: workflow.basedir: that is the main Snakefile's folder, the lab's project when the workflow is a module.
WORKFLOW_SOURCE = workflow.current_basedir.join("..")
#: The checkout holding it, when it is on disk (a local module or this repository); None for a remote module.
REPOSITORY = Path(str(WORKFLOW_SOURCE)).resolve().parent if WORKFLOW_SOURCE.is_local else None


def workflow_file(relative):
    """A local path to the workflow's file ``relative`` (to workflow/), read through Snakemake's source
    cache when the module is remote."""
    source = WORKFLOW_SOURCE.join(relative)
    return Path(str(source)) if source.is_local else Path(workflow.sourcecache.get_path(source))


def repository_path(path):
    """A config's relative path: the working directory's if it names something there (a lab's own copy),
    else the repository's (its catalogue, pipelines, .cellprofiler venv); absolute paths and bare program
    names (`cellprofiler`, left to PATH) as given."""
    if os.path.isabs(path) or os.path.exists(path) or "/" not in path or REPOSITORY is None:
        return path
    return str(REPOSITORY / path)


# The DAG is built by this checkout's package (design functions, config checks), whichever
# condeval the jobs' environment installs; a remote module builds it with the installed condeval.
if REPOSITORY is not None:
    sys.path.insert(0, str(REPOSITORY / "src"))

from condeval.core.chunks import chunk_items  # noqa: E402
from condeval.core.cluster import ClusterJob, cluster_refusals  # noqa: E402
from condeval.core.config import alpha_labels, canonical, check_keywords, config_errors, duplicate_keys  # noqa: E402
from condeval.core.devices import JOB_ENVIRONMENT  # noqa: E402
from condeval.core.io import MANIFEST_SUFFIX  # noqa: E402
from condeval.core.resources import CARDS, encoding_work, folder_parameters, need, needs_beyond  # noqa: E402

# Jobs inherit this process's environment: the allocator settings that keep the latent DQR's
# large activations in the heap (condeval.core.devices.JOB_ENVIRONMENT). A value set by the user wins.
for _variable, _value in JOB_ENVIRONMENT.items():
    os.environ.setdefault(_variable, _value)


def validated(section, schema, prefix=""):
    """``section`` checked against workflow/schemas/``schema``, its defaults filled in.

    Every error is one line naming its config key (condeval.core.config.config_errors, where NaN and
    ``2.0`` for an integer are refused too); Snakemake's validate then adds the schema's defaults.
    """
    path = workflow_file(f"schemas/{schema}")
    errors = config_errors(section, yaml.safe_load(path.read_text()), prefix)
    if errors:
        raise ValueError(f"the config is invalid ({path.name}):\n  " + "\n  ".join(errors))
    validate(section, schema=str(path))
    return section


#: Checks of a real run's DAG before any job starts, in order (Snakemake keeps one onstart handler, this one).
ONSTART_CHECKS = []


def run_onstart_checks(log):
    """onstart: every check of ONSTART_CHECKS; the first to raise stops the run before any job."""
    for check in ONSTART_CHECKS:
        check(log)


def cluster_preflight(log):
    """On a cluster executor, refuse the profile's unset site values and GPU rules granted no GPU
    (condeval.core.cluster), in one message, before any job is submitted."""
    if not workflow.non_local_exec:
        return
    jobs = [
        ClusterJob(job.rule.name, dict(job.resources.items()), "gpu" in job.rule.resources)
        for job in workflow.dag.needrun_jobs()
        if not job.is_local
    ]
    refusals = cluster_refusals(jobs, config.get("gpu_rules_on_cpu", False))
    if refusals:
        raise ValueError("the cluster run cannot start:\n  " + "\n  ".join(refusals))


ONSTART_CHECKS.append(cluster_preflight)

#: Each hub model's stated parameters by the config key it is fetched to (fetch.smk adds the catalogue's).
MODEL_PARAMETERS = {}
#: Parameters read from a folder's safetensors headers, by path: each folder is read once per run, not
#: once per job and resource.
FOLDER_PARAMETERS = {}


def model_size(key, path):
    """The parameters of the model at config key ``key`` (folder ``path``): the catalogue's, else its
    safetensors' (``loaded`` only), else None (a model this run has not made yet)."""
    if key in MODEL_PARAMETERS:
        return MODEL_PARAMETERS[key]
    if path not in FOLDER_PARAMETERS:
        loaded = folder_parameters(path)
        if loaded is None:
            return None  # not made yet: asked again once it may exist
        FOLDER_PARAMETERS[path] = {"loaded": loaded}
    return FOLDER_PARAMETERS[path]


def site_card():
    """The GPU the site grants (config `cluster.gpu`)."""
    return CARDS[config["cluster"]["gpu"]]


def runtime_limit_min():
    """The partition's time limit in minutes (config `cluster.runtime_limit_h`)."""
    return round(config["cluster"]["runtime_limit_h"] * 60)


def job_need(work_of, field, wildcards):
    """One field of a GPU job's resources: its work (``work_of(wildcards)``) sized on the site's card and
    within the partition's time limit."""
    return need(work_of(wildcards), site_card(), runtime_limit_min()).resources()[field]


def gpu_resources(work_of):
    """A GPU rule's host memory, GPU memory, runtime, parts, floor and disk, each computed from its config by
    ``work_of`` (a function of the job's wildcards returning its condeval.core.resources.GpuWork)."""
    fields = ("mem_mb", "gpu_mem_mb", "runtime", "parts", "gpu_floor_min", "written_mb", "scratch_mb")
    return {field: functools.partial(job_need, work_of, field) for field in fields}


def parts_retries(work_of, jobs_wildcards):
    """A resumable rule's ``retries``: each job's later parts, so Snakemake resubmits a job that paused at
    its deadline until its work is done, plus one for a node lost on the way; none for work in one part.
    ``jobs_wildcards`` are the wildcards (as attributes) of every job of the rule the config asks for."""
    parts = max((job_need(work_of, "parts", wildcards) for wildcards in jobs_wildcards), default=1)
    return parts if parts > 1 else 0


def oversized_jobs(log):
    """On a cluster executor, refuse jobs needing more GPU memory than the site's card has or more time
    than its partition's limit (config `cluster`), naming each rule and the numbers."""
    if not workflow.non_local_exec:
        return
    limit_min = runtime_limit_min()
    lines = sorted(
        {
            line
            for job in workflow.dag.needrun_jobs()
            if not job.is_local and "gpu" in job.rule.resources
            for line in needs_beyond(job.rule.name, dict(job.resources.items()), site_card(), limit_min)
        }
    )
    if lines:
        raise ValueError(
            "\n  ".join([f"the cluster run cannot start (config `cluster`: {config['cluster']}):", *lines])
        )


ONSTART_CHECKS.append(oversized_jobs)


onstart:
    run_onstart_checks(log)


_twice = [problem for problem in map(duplicate_keys, workflow.configfiles) if problem]
if _twice:
    raise ValueError("a config file writes a key twice (YAML keeps the last, silently):\n  " + "\n  ".join(_twice))
validated(config, "config.schema.yaml")


def track_config(track):
    """The config section of one track, validated against workflow/schemas/<track>.schema.yaml.

    Validation runs when the Snakefile is parsed, so an invalid config never starts a job.
    """
    section = config.get(track)
    if section is None:
        raise ValueError(f"config key '{track}' is missing")
    return validated(section, f"{track}.schema.yaml", track)


def saved_manifest(folder):
    """The SHA256SUMS-style manifest that a rule saving ``folder`` writes beside it.

    Rules read a saved folder through its manifest, a small file that Snakemake checksums: a
    folder is compared by modification time only, so a `dvc pull` would make its readers rerun.
    Scripts turn the input back into the folder with condeval.core.io.saved_folder.
    """
    return f"{folder}{MANIFEST_SUFFIX}"


# Target rules (Snakefile) read their files here: each configured track declares its own when its
# rules are included, so a target rule names no function of a track that may be absent.
TRACK_TARGETS = {}


def declare_targets(name, files):
    """The files that target rule ``name`` builds, declared by the track that defines them."""
    TRACK_TARGETS[name] = list(files)


def target_inputs(name, section):
    """Input function of the target ``name``, its declared files, or an error naming the missing config section."""

    def inputs(wildcards):
        if name not in TRACK_TARGETS:
            raise ValueError(f"target '{name}' needs the config section '{section}', which this config lacks")
        return TRACK_TARGETS[name]

    return inputs


def default_targets(*names):
    """Files of the named targets whose tracks are configured (rule `all`)."""
    return [path for name in names for path in TRACK_TARGETS.get(name, [])]


# Every file and folder the config names as raw input (data, checkpoints) must exist before any
# job, unless a job of this workflow writes it (the fetch rules, the miniature writers). One
# error lists each missing one with its config key, instead of a job failing hours in.
def _config_paths(section, key, fields):
    """``{key}.{field}: path`` for each of ``fields`` that ``section`` holds."""
    return {f"{key}.{field}": section[field] for field in fields if isinstance(section, dict) and field in section}


def configured_input_paths():
    """Config key → path of every file or folder that the config names as raw input."""
    paths = {}
    coco = config.get("coco", {})
    if coco.get("source") == "files":
        for split in ("train", "val"):
            paths[f"coco.root (annotations/captions_{split}2014.json)"] = (
                f"{coco['root']}/annotations/captions_{split}2014.json"
            )
        paths["coco.root (val2014/)"] = f"{coco['root']}/val2014"
    for name in ("clip", "bert"):
        paths |= _config_paths(config.get("encoders", {}).get(name), f"encoders.{name}", ("path",))
    for name, model in config.get("crel", {}).get("image_to_text", {}).get("models", {}).items():
        paths |= _config_paths(model, f"crel.image_to_text.models.{name}", ("path",))
    crc = config.get("crc", {})
    for name, model in crc.get("models", {}).items():
        paths |= _config_paths(model, f"crc.models.{name}", ("path", "tokenizer", "image_processor"))
    paths |= _config_paths(crc.get("tagger"), "crc.tagger", ("model_dir",))
    return paths | _data_paths(crc.get("data", {}), "crc.data") | _trust_paths(config.get("trust", {}))


def _trust_paths(trust):
    """The trust section's raw inputs: releases without a miniature, saved extractors and autoencoders."""
    paths = _config_paths(trust.get("autoencoder"), "trust.autoencoder", ("path",))
    datasets = trust.get("datasets", {})
    for name, dataset in datasets.items():
        if "miniature" not in dataset:
            paths[f"trust.datasets.{name}.root"] = dataset["root"]
        paths |= _config_paths(dataset.get("autoencoder"), f"trust.datasets.{name}.autoencoder", ("path",))
    for name, extractor in trust.get("extractors", {}).items():
        if "path" in extractor:
            for dataset in datasets:
                paths[f"trust.extractors.{name}.path ({dataset})"] = extractor["path"].replace("{dataset}", dataset)
    return paths | _config_paths(trust.get("clip"), "trust.clip", ("path",))


DATA_FIELDS_NOT_PATHS = ("format", "subsets")  # a release's format and the names of its own splits


def _data_paths(section, key):
    """``key.…: path`` for every string under a data section (its files and image folders), except formats
    and split names."""
    if isinstance(section, str):
        return {key: section}
    if not isinstance(section, dict):
        return {}
    return {
        leaf: path
        for field, value in section.items()
        if field not in DATA_FIELDS_NOT_PATHS
        for leaf, path in _data_paths(value, f"{key}.{field}").items()
    }


def _written_by(output, path):
    """Whether an output pattern writes ``path`` (the very file, a folder holding it, or files inside it)."""
    pattern = str(output).rstrip("/")
    return (
        output.match(path)
        or path.startswith(f"{pattern}/")
        or pattern.split("{", 1)[0].startswith(f"{path.rstrip('/')}/")
    )


def check_configured_inputs():
    """Raise, listing every missing one with its config key, if a configured input nothing writes is absent.

    Called by the Snakefile once all rules are defined. Skipped with ``--config check_inputs=False`` (Snakemake reads only True/False as booleans)
    (documented in docs/workflow.md) for a dry run on a machine without the data.
    """
    if config.get("check_inputs", True) is False:
        return
    missing = {
        key: path
        for key, path in configured_input_paths().items()
        if not os.path.exists(path)
        and not any(_written_by(output, path) for job_rule in workflow.rules for output in job_rule.output)
    }
    if missing:
        listing = "\n".join(f"  {key}: {path}" for key, path in missing.items())
        raise ValueError(
            f"{len(missing)} configured input(s) are missing, and no job of this workflow writes them:\n{listing}"
        )
