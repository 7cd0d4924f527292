"""Long per-item jobs resume after a kill: the chunks a killed job wrote are kept, the rest computed, and the
output is the same bytes as an uninterrupted run's."""

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from condeval.core.chunks import ChunkedWork, chunk_slices, scratch_folder
from condeval.encoders.shards import encode_feature_shard, read_feature_shards

META = {"encoder": {"name": "toy", "weights_sha256": "abc"}, "input": "toy"}


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _features(items: slice) -> np.ndarray:
    rows = np.arange(items.start, items.stop, dtype=np.float32)[:, None]
    return np.hstack([rows, rows**2, np.sin(rows)])


class Killed(RuntimeError):
    pass


def test_chunk_slices_cut_at_fixed_positions():
    assert chunk_slices(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert chunk_slices(0, 4) == []
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        chunk_slices(3, 0)


def test_a_feature_shard_interrupted_midway_resumes_to_the_same_bytes(tmp_path):
    ids = np.arange(100, 110)
    whole = tmp_path / "whole.safetensors"
    encode_feature_shard(whole, ids, _features, META, chunk_size=3)
    assert not scratch_folder(whole).exists()  # cleared once the shard is written

    resumed, calls = tmp_path / "resumed.safetensors", []

    def failing(items):
        calls.append(items.start)
        if items.start == 6:
            raise Killed("the node went down")
        return _features(items)

    with pytest.raises(Killed):
        encode_feature_shard(resumed, ids, failing, META, chunk_size=3)
    assert not resumed.exists() and len(list(scratch_folder(resumed).glob("chunk-*"))) == 2
    calls.clear()
    encode_feature_shard(resumed, ids, _count(calls), META, chunk_size=3)
    assert calls == [6, 9]  # the two finished chunks are read back, not recomputed
    assert _sha(resumed) == _sha(whole)
    _, features, _ = read_feature_shards([resumed])
    np.testing.assert_array_equal(features, _features(slice(0, 10)))


def _count(calls):
    def encode(items):
        calls.append(items.start)
        return _features(items)

    return encode


def test_chunks_of_other_inputs_are_discarded_not_reused(tmp_path):
    output = tmp_path / "shard.safetensors"
    work = ChunkedWork(output, {"model": "v1"}, 6, 2)
    work.run(lambda items, folder: (folder / "x").write_text("v1"))
    assert ChunkedWork(output, {"model": "v1"}, 6, 2).done == [0, 1, 2]
    assert ChunkedWork(output, {"model": "v2 (retrained)"}, 6, 2).done == []


def test_an_empty_shard_is_written_with_the_encoders_width(tmp_path):
    features = encode_feature_shard(tmp_path / "empty.safetensors", np.arange(0), _features, META, chunk_size=4)
    assert features.shape == (0, 3)


DRAW_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from PIL import Image
    from condeval.generators.images import generate_image_shard

    folder, manifest, slow = sys.argv[1], sys.argv[2], float(sys.argv[3])
    ids = list(range(40, 52))

    def draw(items):
        time.sleep(slow)
        return [Image.fromarray(np.full((8, 8, 3), i * 7 % 256, np.uint8)) for i in ids[items]]

    generate_image_shard(draw, ids, [f"prompt {i}" for i in ids], [i * 3 for i in ids], folder, manifest,
                         chunk_size=4, fingerprint={"model": "toy"})
    """
)


def _run_draw(tmp_path, name: str, slow: float) -> subprocess.Popen:
    script = tmp_path / "draw.py"
    script.write_text(DRAW_SCRIPT)
    out = tmp_path / name
    out.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, str(script), str(out / "images"), str(out / "images.parquet"), str(slow)])


def _tree(folder) -> dict:
    return {str(p.relative_to(folder)): _sha(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_generation_job_killed_by_a_signal_resumes_to_the_same_files(tmp_path):
    assert _run_draw(tmp_path, "whole", 0.0).wait(timeout=120) == 0
    job = _run_draw(tmp_path, "killed", 1.0)
    scratch = scratch_folder(tmp_path / "killed/images.parquet")
    deadline = time.monotonic() + 120
    while not (scratch / "chunk-00000").is_dir():  # the first chunk written whole, the second under way
        assert time.monotonic() < deadline and job.poll() is None, "the job ended before writing a chunk"
        time.sleep(0.05)
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    assert not (tmp_path / "killed/images.parquet").exists()
    assert _run_draw(tmp_path, "killed", 0.0).wait(timeout=120) == 0
    assert _tree(tmp_path / "killed") == _tree(tmp_path / "whole") and len(_tree(tmp_path / "whole")) == 13
