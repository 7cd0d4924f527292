"""The rehearsal's stanza models: stanza's own loaders read them offline, as the real downloaded folder."""

import json
import shutil
from pathlib import Path

import pytest
import stanza
import stanza.resources.common as stanza_resources
import torch
from stanza.models.common.vocab import VOCAB_PREFIX
from stanza.pipeline.core import build_default_config
from stanza.resources.common import add_dependencies, get_md5, maintain_processor_list
from stanza.resources.prepare_resources import get_dependencies

from condeval.crc.pos import StanzaTagger, maskable_words
from condeval.rehearsal.stanza_models import DEFAULT_WORDS, UPOS_TAGS, EnglishPackages, write_stanza_models

SENTENCE = ["a", "red", "circle", "beside", "two", "blue", "squares"]
WORDS = ["A", "red", "circle", "beside", "two", "blue", "squares", "dog"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_stanza_models(tmp_path_factory.mktemp("stanza"), WORDS, seed=0)


@pytest.fixture
def offline(monkeypatch):
    """Any download stanza tries fails the test."""

    def refuse(url, *args, **kwargs):
        raise AssertionError(f"stanza tried to download {url}")

    monkeypatch.setattr(stanza_resources, "download_file", refuse)
    monkeypatch.setenv("STANZA_RESOURCES_DIR", "/nonexistent/stanza_resources")


def _resources(folder: Path) -> dict:
    return json.loads((folder / "resources.json").read_text())


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_the_tagger_tags_each_word_with_a_upos_offline(folder, offline):
    tagger = StanzaTagger(folder)
    tags = tagger.tag(SENTENCE)
    assert len(tags) == len(SENTENCE)
    assert set(tags) <= set(UPOS_TAGS)
    unknown = tagger.tag(["Zebras", "gallop", "!"])
    assert len(unknown) == 3 and set(unknown) <= set(UPOS_TAGS)
    # random tags, yet not one tag for everything: masking has words to mask and words to keep
    masked = maskable_words(tagger, WORDS)
    assert 0 < len(masked) < len(WORDS) and len(set(tagger.tag(WORDS))) > 2


def test_the_tag_set_is_the_universal_one_and_the_vocabulary_the_given_words(folder, offline):
    pos = StanzaTagger(folder).pipeline.processors["pos"]
    assert sorted(pos.get_known_upos()) == sorted(UPOS_TAGS) and len(UPOS_TAGS) == 17
    lowered = list(dict.fromkeys(word.lower() for word in WORDS))
    assert sorted(pos.vocab["word"]) == sorted(VOCAB_PREFIX + lowered)
    assert sorted(pos.pretrain.vocab) == sorted(VOCAB_PREFIX + lowered)
    assert pos.trainer.args["charlm"] and pos.trainer.args["pretrain"]


def test_the_layout_is_what_the_pipeline_resolves_for_en(folder):
    resources = _resources(folder)
    processors = {"tokenize": "default", "pos": "default"}
    load_list = maintain_processor_list(resources, "en", None, processors, maybe_add_mwt=False)
    load_list = add_dependencies(resources, "en", load_list)
    config = build_default_config(resources, "en", str(folder), load_list)
    packages = EnglishPackages()
    assert config == {
        "tokenize_model_path": str(folder / "en/tokenize" / f"{packages.tokenize}.pt"),
        "pos_model_path": str(folder / "en/pos" / f"{packages.pos}.pt"),
        "pos_pretrain_path": str(folder / "en/pretrain" / f"{packages.pretrain}.pt"),
        "pos_forward_charlm_path": str(folder / "en/forward_charlm" / f"{packages.charlm}.pt"),
        "pos_backward_charlm_path": str(folder / "en/backward_charlm" / f"{packages.charlm}.pt"),
    }
    assert all(Path(path).is_file() for path in config.values())
    assert (packages.tokenize, packages.pos) == ("combined", "combined_charlm")
    # the dependencies stanza's own resource builder gives English's default tagger
    assert resources["en"]["pos"][packages.pos]["dependencies"] == get_dependencies("pos", "en", packages.pos)


def test_the_md5s_in_resources_json_are_the_files(folder):
    listed = {}
    for processor, entries in _resources(folder)["en"].items():
        for package, entry in entries.items() if isinstance(entries, dict) else ():
            if isinstance(entry, dict) and "md5" in entry:
                listed[f"en/{processor}/{package}.pt"] = entry["md5"]
    written = {name for name in _files(folder) if name.endswith(".pt")}
    assert set(listed) == written
    assert all(get_md5(folder / name) == md5 for name, md5 in listed.items())


def test_stanza_checks_the_md5s_and_downloads_nothing(folder, offline):
    # reuse_resources checks each file's md5 and downloads any that differs: the refusal would fail
    pipeline = stanza.Pipeline(
        "en", processors="tokenize,pos", dir=str(folder), download_method="reuse_resources", verbose=False
    )
    document = pipeline("A red circle beside two blue squares.")
    tags = [word.upos for sentence in document.sentences for word in sentence.words]
    assert tags and set(tags) <= set(UPOS_TAGS)


def test_a_changed_file_fails_the_md5_check(folder, offline, tmp_path):
    changed = Path(shutil.copytree(folder, tmp_path / "copy"))
    pos = changed / "en/pos" / f"{EnglishPackages().pos}.pt"
    pos.write_bytes(pos.read_bytes() + b"\0")
    with pytest.raises(AssertionError, match="stanza tried to download"):
        stanza.Pipeline("en", processors="tokenize,pos", dir=str(changed), download_method="reuse_resources")


def test_the_same_seed_writes_the_same_bytes(folder, tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again = _files(write_stanza_models(tmp_path / "again", WORDS, seed=0))
    assert torch.equal(torch.rand(3), expected)  # the caller's generator did not move
    assert again == _files(folder)
    other = _files(write_stanza_models(tmp_path / "again", WORDS, seed=1))  # over the seed-0 files
    assert other.keys() == again.keys()
    assert all(other[name] != again[name] for name in again if name.endswith(".pt"))
    assert _files(write_stanza_models(tmp_path / "fresh", WORDS, seed=1)) == other


def test_the_folder_is_small(folder):
    assert sum(len(data) for data in _files(folder).values()) < 5_000_000


@pytest.mark.parametrize(
    "relative",
    [
        "en/pos/combined_charlm.pt",
        "en/pretrain/conll17.pt",
        "en/forward_charlm/1billion.pt",
        "en/backward_charlm/1billion.pt",
        "resources.json",
    ],
)
def test_a_missing_file_is_named_in_stanzas_error(folder, offline, tmp_path, relative):
    copy = Path(shutil.copytree(folder, tmp_path / "copy"))
    (copy / relative).unlink()
    with pytest.raises(FileNotFoundError) as error:
        StanzaTagger(copy)
    assert str(copy / relative) in str(error.value)


def test_the_default_words_build(tmp_path, offline):
    tags = StanzaTagger(write_stanza_models(tmp_path, seed=3)).tag(list(DEFAULT_WORDS))
    assert len(tags) == len(DEFAULT_WORDS) and set(tags) <= set(UPOS_TAGS)


@pytest.mark.parametrize(("words", "error"), [([], ValueError), ("red", TypeError), (["two words"], ValueError)])
def test_bad_words_are_refused(tmp_path, words, error):
    with pytest.raises(error):
        write_stanza_models(tmp_path, words)
