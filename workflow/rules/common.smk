# Helpers every track needs. Track helpers live in workflow/rules/<track>/common.smk; input
# functions live there too, never lambdas inside rules.
import os
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.0")

# The DAG is built by this checkout's package (design functions, config checks), whichever
# condeval the jobs' environment installs.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from condeval.core.config import alpha_labels, canonical  # noqa: E402
from condeval.core.devices import JOB_ENVIRONMENT  # noqa: E402
from condeval.core.io import MANIFEST_SUFFIX  # noqa: E402

# Jobs inherit this process's environment: the allocator settings that keep the latent DQR's
# large activations in the heap (condeval.core.devices.JOB_ENVIRONMENT). A value set by the user wins.
for _variable, _value in JOB_ENVIRONMENT.items():
    os.environ.setdefault(_variable, _value)


validate(config, schema="../schemas/config.schema.yaml")


def track_config(track):
    """The config section of one track, validated against workflow/schemas/<track>.schema.yaml.

    Validation runs when the Snakefile is parsed, so an invalid config never starts a job.
    """
    section = config.get(track)
    if section is None:
        raise ValueError(f"config key '{track}' is missing")
    try:
        validate(section, schema=str(Path(workflow.basedir) / "workflow" / "schemas" / f"{track}.schema.yaml"))
    except Exception as error:
        raise ValueError(f"config section '{track}' is invalid: {error}") from None
    return section


# Target rules (Snakefile) read their files here: each configured track declares its own when its
# rules are included, so a target rule names no function of a track that may be absent.
TRACK_TARGETS = {}


def declare_targets(name, files):
    """The files that target rule ``name`` builds, declared by the track that defines them."""
    TRACK_TARGETS[name] = list(files)


def target_inputs(name, section):
    """Input function of target rule ``name``: its declared files, or an error naming the missing config section."""

    def inputs(wildcards):
        if name not in TRACK_TARGETS:
            raise ValueError(f"target '{name}' needs the config section '{section}', which this config lacks")
        return TRACK_TARGETS[name]

    return inputs


def default_targets(*names):
    """Files of the named targets whose tracks are configured (rule `all`)."""
    return [path for name in names for path in TRACK_TARGETS.get(name, [])]
