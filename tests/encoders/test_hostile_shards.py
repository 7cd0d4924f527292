"""Feature shards a lab could hand over broken: float ids, a null encoder hash, and one id in two shards are
refused naming the shards (float ids joined their integer neighbours; a null hash raised a raw TypeError;
a repeated id let the last shard's row win silently)."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from condeval.encoders.shards import FeatureShardError, read_feature_shards, write_feature_shard

META = {"encoder": {"weights_sha256": "a" * 64}}


def _raw_shard(path, ids, metadata):
    features = np.ones((len(ids), 3), dtype=np.float32)
    save_file(
        {"ids": np.asarray(ids), "features": features},
        str(path),
        metadata={key: json.dumps(value) for key, value in metadata.items()},
    )
    return path


def test_float_ids_are_refused_naming_the_shard(tmp_path):
    path = _raw_shard(tmp_path / "float.safetensors", np.array([0.0, 1.5]), META)
    with pytest.raises(FeatureShardError, match=r"float\.safetensors: ids must be integers; found dtype float64"):
        read_feature_shards([path])


def test_a_null_encoder_hash_is_refused_naming_the_shard(tmp_path):
    path = _raw_shard(tmp_path / "null.safetensors", np.array([0, 1]), {"encoder": {"weights_sha256": None}})
    with pytest.raises(FeatureShardError, match=r"null\.safetensors: the shard's metadata names no encoder"):
        read_feature_shards([path])


def test_one_id_in_two_shards_is_refused_naming_both(tmp_path):
    first, second = tmp_path / "shard-0.safetensors", tmp_path / "shard-1.safetensors"
    write_feature_shard(first, np.array([0, 1, 2]), np.zeros((3, 3)), META)
    write_feature_shard(second, np.array([2, 3]), np.ones((2, 3)), META)
    with pytest.raises(FeatureShardError, match=r"id 2 appears 2 times, in .*shard-0.*, .*shard-1"):
        read_feature_shards([first, second])
    ids, _, _ = read_feature_shards([first])
    assert ids.tolist() == [0, 1, 2]
