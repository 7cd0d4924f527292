"""Fixtures shared by more than one test folder, and the order `make test`'s two workers take the modules in."""

import os
from pathlib import Path

import pytest
import torch

# `make test` runs two pytest-xdist workers (-n 2 --dist loadfile --no-loadscope-reorder), one test
# module a unit of work so that a module's fixtures are built once. Most of the suite's time is the shared
# tiny run of every track (tests/workflow/conftest.py ``tiny_run``, about 2 cores for 24 minutes on a slow
# host) and the modules that read it. So the first of its readers is queued first, and one worker starts
# the run at once; the other starts the paper config's rehearsal (tests/workflow/test_rehearsal.py, the
# longest module), then takes every module that does not read the run; the remaining readers come last,
# the heaviest first, when both workers can share them. Each worker's torch gets one of the 2 cores.
TINY_RUN_READERS = (  # heaviest first, by the durations of a serial run (docs/development.md)
    "test_workflow.py",
    "test_dvc_sharing.py",
    "test_slurm.py",
    "test_i2t.py",
    "test_t2i.py",
    "test_crc.py",
    "test_trust.py",
)

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# The repository's lock folder holds a lab's real locks (condeval.core.fetch): a test that fetches must
# name its own (fetch.lock), or its loopback commits would be committed as the hub's.
REPOSITORY_LOCKS = Path(__file__).resolve().parents[1] / "config/sources.lock"


def _locks() -> set[str]:
    return {path.name for path in REPOSITORY_LOCKS.glob("*.yaml")}


@pytest.fixture(scope="session", autouse=True)
def no_test_writes_the_repositorys_locks():
    before = _locks()
    yield
    written = sorted(_locks() - before)
    assert not written, f"a test wrote {written} into {REPOSITORY_LOCKS}: give its fetch a lock folder of its own"


def _module(item) -> str:
    return item.nodeid.split("::")[0]


def _reader_weight(module: str) -> int:
    """A tiny-run reader's place in ``TINY_RUN_READERS`` (0 heaviest); one not listed comes after them."""
    name = module.rsplit("/", 1)[-1]
    return TINY_RUN_READERS.index(name) if name in TINY_RUN_READERS else len(TINY_RUN_READERS)


def pytest_collection_modifyitems(config, items):
    """Under xdist: the modules queued as the comment on ``TINY_RUN_READERS`` says."""
    if not hasattr(config, "workerinput"):
        return
    readers = {_module(item) for item in items if "tiny_run" in item.fixturenames}
    starter = max(readers, key=_reader_weight, default="")

    def rank(item) -> tuple[int, int]:
        module = _module(item)
        if module.endswith("/test_rehearsal.py"):
            return (0, 1)
        if module not in readers:
            return (1, 0)
        return (0, 0) if module == starter else (2, _reader_weight(module))

    items.sort(key=rank)


@pytest.fixture
def attribute_pipeline():
    """A factory of randomly initialised tiny ``AttributeDiffusionPipeline``s (attributes with 2 and 3
    values, 16-pixel images, ``num_layers`` joint blocks), seeded."""

    def make(seed: int = 0, num_layers: int = 1):
        from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel

        from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder

        torch.manual_seed(seed)
        transformer = SD3Transformer2DModel(
            sample_size=8,
            patch_size=2,
            in_channels=4,
            out_channels=4,
            num_layers=num_layers,
            attention_head_dim=8,
            num_attention_heads=2,
            joint_attention_dim=24,
            caption_projection_dim=16,
            pooled_projection_dim=32,
            pos_embed_max_size=4,
        )
        vae = AutoencoderKL(
            block_out_channels=(8, 8),
            down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2,
            norm_num_groups=4,
            latent_channels=4,
            use_quant_conv=False,
            use_post_quant_conv=False,
        )
        encoder = AttributeEncoder(values=(2, 3), width=32, context_width=24)
        return AttributeDiffusionPipeline(transformer, vae, FlowMatchEulerDiscreteScheduler(), encoder)

    return make
