"""The trust generators train from disk: their fixed inputs (latents, REPA targets) are encoded once, chunk by
chunk, and read a batch at a time, so a job's memory does not grow with its dataset and a restart encodes
nothing twice."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch


class LazyImages:
    """Images made when a slice is read, as a release read from disk (``trust.data.ReleaseImages``)."""

    def __init__(self, n: int, side: int, channels: int = 3, seed: int = 0):
        self.n, self.side, self.channels, self.seed, self.reads = n, side, channels, seed, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows: slice) -> np.ndarray:
        self.reads.append((rows.start, rows.stop))
        return np.stack([self.image(i) for i in range(*rows.indices(self.n))])

    def image(self, i: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, i])
        base = rng.integers(0, 256, (self.channels, 1, 1))
        return np.clip(base + rng.normal(0, 20, (self.channels, self.side, self.side)), 0, 255).astype(np.uint8)


def tiny_vae(blocks: int = 2):
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    return AutoencoderKL(
        block_out_channels=(8,) * blocks,
        down_block_types=("DownEncoderBlock2D",) * blocks,
        up_block_types=("UpDecoderBlock2D",) * blocks,
        norm_num_groups=4,
        latent_channels=4,
        use_quant_conv=False,
        use_post_quant_conv=False,
    ).eval()


def _train(images, out_dir, vae=None):
    from condeval.core.training import TrainRecipe
    from condeval.generators.attribute_training import FlowSchedule, train_attribute_generator

    attributes = np.asfortranarray(
        np.stack([np.arange(len(images)) % 2, np.arange(len(images)) % 3], axis=1)
    )  # as polars gives
    return train_attribute_generator(
        images,
        attributes,
        out_dir,
        TrainRecipe(epochs=1, batch_size=8, lr=1e-3, held_out=8, seed=0),
        vae=tiny_vae() if vae is None else vae,
        model={"values": [2, 3], "layers": 1, "heads": 2},
        schedule=FlowSchedule(chunk_size=16),
    )


def _weights(folder) -> dict:
    from safetensors.numpy import load_file

    return {path.parent.name: load_file(path) for path in sorted(folder.rglob("*.safetensors"))}


def test_an_image_source_read_a_chunk_at_a_time_trains_the_same_model_as_an_array(tmp_path):
    lazy = LazyImages(40, 16)
    _train(lazy, tmp_path / "streamed")
    _train(lazy[0:40], tmp_path / "in_memory")
    assert lazy.reads[:4] == [(0, 1), (0, 16), (16, 32), (32, 40)]  # its first image checked, then chunks, never whole
    streamed, in_memory = _weights(tmp_path / "streamed"), _weights(tmp_path / "in_memory")
    assert streamed.keys() == in_memory.keys() and "transformer" in streamed
    for part in streamed:
        for name in streamed[part]:
            np.testing.assert_array_equal(streamed[part][name], in_memory[part][name])
    assert not (tmp_path / "streamed_run" / ".rows.chunks").exists()  # the cache is cleared once the model is saved


def test_a_job_killed_after_encoding_resumes_without_reading_an_image_again(tmp_path, monkeypatch):
    import condeval.generators.text_to_image_training as training

    lazy, fit_best = LazyImages(40, 16), training._fit_best

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("the job's time limit")

    monkeypatch.setattr(training, "_fit_best", killed)
    with pytest.raises(KeyboardInterrupt):
        _train(lazy, tmp_path / "model")
    assert len(lazy.reads) == 4  # the first image checked, then the three chunks
    monkeypatch.setattr(training, "_fit_best", fit_best)
    _train(lazy, tmp_path / "model")
    assert lazy.reads[4:] == [(0, 1)]  # every chunk came from the cache
    assert (tmp_path / "model" / "model_index.json").is_file()


RSS_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    sys.path.insert(0, sys.argv[3])
    from test_attribute_streaming import LazyImages, _train, tiny_vae

    n, out = int(sys.argv[1]), sys.argv[2]
    _train(LazyImages(n, 256), out, vae=tiny_vae(4))
    print(json.dumps({"images": n, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    """
)


def _peak_rss(tmp_path, n: int) -> float:
    from pathlib import Path

    script = tmp_path / "rss.py"
    script.write_text(RSS_SCRIPT)
    tests = str(Path(__file__).parent)
    result = subprocess.run(
        [sys.executable, str(script), str(n), str(tmp_path / f"model-{n}"), tests],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_rss_mb"]


@pytest.mark.slow
def test_a_training_jobs_peak_memory_does_not_grow_with_its_dataset(tmp_path):
    """256-pixel RGB images, as the paper's generators read them: 48 and 192 of them (each 0.8 MB as
    float pixels). Holding them all would add about 110 MB; streaming adds nothing beyond noise."""
    small, large = _peak_rss(tmp_path, 48), _peak_rss(tmp_path, 192)
    print(f"peak RSS: {small:.0f} MB at 48 images, {large:.0f} MB at 192")
    assert large - small < 40, f"peak RSS grew from {small:.0f} MB to {large:.0f} MB with 4x the images"
