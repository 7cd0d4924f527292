"""Saved-folder manifests: what makes a pulled model folder count as unchanged, and a tampered one fail."""

import hashlib
import subprocess

import pytest

from condeval.core.io import DataFileError, saved_folder, write_folder_manifest


@pytest.fixture()
def model(tmp_path):
    folder = tmp_path / "clip"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 40)
    (folder / "sub" / "tokenizer.json").write_text("{}")
    return folder


def test_manifest_is_sha256sum_format_and_round_trips(model):
    manifest = write_folder_manifest(model, model.parent / "clip.sha256")
    assert manifest.name == "clip.sha256"
    (model / ".snakemake_timestamp").touch()  # what Snakemake adds to a finished directory() output
    # The standard tool agrees with every line (sha256sum -c run inside the folder).
    check = subprocess.run(["sha256sum", "-c", str(manifest)], cwd=model, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert len(manifest.read_text().splitlines()) == 3
    assert saved_folder(manifest) == model


def test_manifest_changes_exactly_when_a_file_does(model):
    manifest = write_folder_manifest(model, model.parent / "clip.sha256")
    before = manifest.read_bytes()
    (model / "config.json").touch()  # a new mtime, the same bytes
    assert write_folder_manifest(model, manifest).read_bytes() == before
    (model / "model.safetensors").write_bytes(b"retrained")
    after = write_folder_manifest(model, manifest).read_text()
    assert after.encode() != before
    assert hashlib.sha256(b"retrained").hexdigest() in after


def test_a_changed_missing_or_unlisted_file_is_named(model):
    manifest = write_folder_manifest(model, model.parent / "clip.sha256")
    (model / "model.safetensors").write_bytes(b"corrupted")
    with pytest.raises(DataFileError, match=r"clip\.sha256: .*model\.safetensors does not match"):
        saved_folder(manifest)
    assert saved_folder(manifest, verify=False) == model
    write_folder_manifest(model, manifest)
    (model / "sub" / "tokenizer.json").unlink()
    with pytest.raises(DataFileError, match=r"listed file .*sub/tokenizer\.json is missing"):
        saved_folder(manifest)
    write_folder_manifest(model, manifest)
    (model / "stray.bin").write_bytes(b"x")
    with pytest.raises(DataFileError, match=r"stray\.bin is not listed"):
        saved_folder(manifest)


def test_a_configured_folder_passes_through_and_bad_paths_are_named(model, tmp_path):
    assert saved_folder(model) == model
    with pytest.raises(DataFileError, match="saved folder not found"):
        saved_folder(tmp_path / "absent")
    with pytest.raises(DataFileError, match="file not found"):
        saved_folder(tmp_path / "absent.sha256")
    bad = tmp_path / "clip.sha256"
    bad.write_text("not a checksum line\n")
    with pytest.raises(DataFileError, match="line 1"):
        saved_folder(bad)
    with pytest.raises(ValueError, match="must be named clip.sha256"):
        write_folder_manifest(model, tmp_path / "other.sha256")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFileError, match="no files"):
        write_folder_manifest(tmp_path / "empty", tmp_path / "empty.sha256")


def test_a_killed_folder_write_leaves_nothing_in_the_output_folder(tmp_path):
    """A job killed inside ``atomic_directory`` left its temporary folder beside the output for good (inside
    the DVC-tracked results, pushed with them); the next write of the same folder removes it, and leaves
    other targets' temporaries and look-alike names alone."""
    from condeval.core.io import atomic_directory

    leftover = tmp_path / ".shard-0.k1ll3d_x"
    leftover.mkdir()
    (leftover / "0000_w1.png").write_bytes(b"half")
    others = [
        tmp_path / ".shard-1.k1ll3d_x",
        tmp_path / ".shard-0.notours",
        tmp_path / "shard-0.k1ll3d_x",
        tmp_path / ".shard-0.parquet.k1ll3d_x.parquet",
    ]
    for other in others:
        other.write_bytes(b"keep")
    with atomic_directory(tmp_path / "shard-0") as tmp:
        (tmp / "0000_w1.png").write_bytes(b"whole")
    assert not leftover.exists() and all(other.exists() for other in others)
    assert (tmp_path / "shard-0" / "0000_w1.png").read_bytes() == b"whole"


def test_a_jobs_fingerprint_reads_a_configured_checkpoint_folder_by_its_files(tmp_path):
    """The paper config names checkpoint folders (the hub's sd-vae-ft-mse) where the miniature has files."""
    from condeval.core.io import fingerprint

    for name in ("a", "b"):
        (tmp_path / name / "vae").mkdir(parents=True)
        (tmp_path / name / "config.json").write_text("{}")
        (tmp_path / name / "vae" / "weights.safetensors").write_bytes(b"weights")
    assert fingerprint([tmp_path / "a"]) == fingerprint([tmp_path / "b"])  # by content and names, not by path
    (tmp_path / "b" / "vae" / "weights.safetensors").write_bytes(b"retrained")
    assert fingerprint([tmp_path / "a"]) != fingerprint([tmp_path / "b"])
