"""The miniature COCO world: COCO's exact layout, determinism, and token labels that match the scene."""

import json

import numpy as np
import pytest
from PIL import Image

from condeval.datasets.coco import load_captions
from condeval.datasets.miniworld import COLOURS, SHAPES, SIZES, captions_for, draw_scene, write_split

UPOS = {"DET", "ADJ", "NOUN", "NUM", "ADP", "VERB", "PRON", "CCONJ", "ADV"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("miniworld")
    return root, write_split(root, "val", 30, seed=3)


def test_vocabularies_are_a_real_task():
    assert len(SHAPES) >= 10 and len(COLOURS) >= 10 and len(SIZES) >= 2


def test_the_coco_loader_reads_it_like_the_real_file(world):
    root, captions = world
    frame = load_captions(captions, root / "val2014")
    assert frame.height == 150 and frame["image_id"].n_unique() == 30
    assert frame.group_by("image_id").len()["len"].to_list() == [5] * 30
    assert frame["file_name"][0] == "COCO_val2014_000000000001.jpg"
    document = json.loads(captions.read_text())
    assert {"info", "images", "licenses", "annotations"} <= set(document)
    assert {"id", "width", "height", "file_name", "license", "coco_url", "date_captured"} <= set(document["images"][0])
    with Image.open(frame["path"][0]) as image:
        assert image.format == "JPEG" and image.size == (64, 64)


def test_same_seed_same_bytes_and_images_independent_of_the_count(world, tmp_path):
    root, captions = world
    again = write_split(tmp_path / "a", "val", 30, seed=3)
    assert again.read_bytes() == captions.read_bytes()
    fewer = write_split(tmp_path / "b", "val", 5, seed=3)
    name = "val2014/COCO_val2014_000000000004.jpg"
    assert (tmp_path / "b" / name).read_bytes() == (root / name).read_bytes()
    assert fewer.read_bytes() != captions.read_bytes()
    other = write_split(tmp_path / "c", "val", 30, seed=4)
    assert other.read_bytes() != captions.read_bytes()


def test_token_labels_name_the_objects_of_the_scene(world):
    root, captions = world
    scenes = json.loads((root / "annotations/scenes_val2014.json").read_text())
    texts = {a["id"]: a["caption"] for a in json.loads(captions.read_text())["annotations"]}
    lines = [json.loads(line) for line in (root / "annotations/tokens_val2014.jsonl").read_text().splitlines()]
    assert len(lines) == len(texts)
    for line in lines:
        assert " ".join(line["tokens"]) == texts[line["id"]]
        assert len(line["tokens"]) == len(line["pos"]) == len(line["objects"])
        assert set(line["pos"]) <= UPOS
        objects = scenes[str(line["image_id"])]
        for word, pos, index in zip(line["tokens"], line["pos"], line["objects"]):
            if index < 0:
                continue
            obj = objects[index]
            if pos == "NOUN":
                nouns = SHAPES[obj["shape"]]
                assert word in {*nouns, *(n + "s" for n in nouns), *(n + "es" for n in nouns)}, (word, obj)
            if pos == "ADJ" and word in COLOURS:
                assert word == obj["colour"], (word, obj)


def test_captions_vary_and_sometimes_omit_objects():
    rng = np.random.default_rng(0)
    omitted = distinct = 0
    for _ in range(200):
        objects = draw_scene(rng)
        captions = captions_for(objects, rng)
        distinct += len({c.text for c in captions}) > 1
        named = [len({i for i in c.objects if i >= 0}) for c in captions]
        omitted += len(objects) > 1 and min(named) < len(objects)
    assert distinct > 150 and omitted > 40
    assert all(0.0 < o.x < 1.0 and 0.0 < o.y < 1.0 for o in draw_scene(rng))


def test_the_vocabulary_holds_every_word_the_grammar_emits():
    from condeval.datasets.miniworld import vocabulary

    rng = np.random.default_rng(5)
    emitted = {token for _ in range(3000) for caption in captions_for(draw_scene(rng), rng) for token in caption.tokens}
    words = set(vocabulary())
    assert emitted <= words
    assert len(words - emitted) <= 3  # nothing invented: at most a rare plural never drawn here


def test_a_shape_swap_changes_exactly_one_noun_to_another_shape():
    from condeval.datasets.miniworld import SHAPES, swap_shape_noun

    noun_shape = {noun: shape for shape, nouns in SHAPES.items() for noun in nouns}
    rng = np.random.default_rng(0)
    for tokens in (["a", "red", "circle", "above", "two", "boxes"], ["there", "is", "an", "octopus"], ["a", "ring"]):
        swapped = swap_shape_noun(tokens, rng)
        if tokens[-1] == "octopus":
            assert swapped is None
            continue
        new, k = swapped
        changed = [i for i, (a, b) in enumerate(zip(tokens, new)) if a != b and a not in ("a", "an")]
        assert changed == [k] and len(new) == len(tokens)
        old_noun, new_noun = tokens[k], new[k]
        assert old_noun.endswith("es") == new_noun.endswith("es") or old_noun.endswith("s") == new_noun.endswith("s")
        singular = lambda w: w if w in noun_shape else (w[:-2] if w[:-2] in noun_shape else w[:-1])  # noqa: E731
        assert noun_shape[singular(old_noun)] != noun_shape[singular(new_noun)]


# The least colour distance (Euclidean, RGB 0-255) between an object's rendered interior and the
# background right around it, over every colour on many backgrounds. Gray (128, 128, 128) on the
# 95-160 field measured 1.5; purple, the weakest of the rest, about 89 over 200 backgrounds.
MIN_CONTRAST = 80.0


def _object_and_surround_colours(colour: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean RGB inside a large disc of ``colour`` at the centre of a rendered JPEG, and just outside it."""
    import io

    from condeval.datasets.miniworld import SceneObject, render_scene

    side = 64
    image = render_scene([SceneObject("circle", colour, "large", 0.5, 0.5)], np.random.default_rng(seed), side)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)  # as write_split stores it
    pixels = np.asarray(Image.open(buffer), dtype=np.float64)
    yy, xx = np.mgrid[:side, :side] + 0.5
    distance = np.hypot(xx - side / 2, yy - side / 2) / (SIZES["large"] * side)
    return pixels[distance < 0.7].mean(axis=0), pixels[(distance > 1.3) & (distance < 1.7)].mean(axis=0)


@pytest.mark.parametrize("colour", list(COLOURS))
def test_every_colour_stands_out_from_the_background_around_it(colour):
    contrasts = [np.linalg.norm(np.subtract(*_object_and_surround_colours(colour, seed))) for seed in range(40)]
    assert min(contrasts) >= MIN_CONTRAST, (colour, min(contrasts))


def test_object_centres_sit_on_the_patch_grid_whole_and_apart():
    from condeval.datasets.miniworld import POSITION_GRID

    rng = np.random.default_rng(11)
    scenes = [draw_scene(rng) for _ in range(2000)]
    objects = [o for scene in scenes for o in scene]
    cells = np.array([[o.x, o.y] for o in objects]) * POSITION_GRID - 0.5
    assert np.allclose(cells, np.round(cells))  # a lattice centre, not a continuous position
    radius = np.array([SIZES[o.size] for o in objects])
    assert np.all(np.array([[o.x, o.y] for o in objects]).T - radius >= 0)  # never cut by the border
    assert np.all(np.array([[o.x, o.y] for o in objects]).T + radius <= 1)
    assert len({o.x for o in objects}) >= 6 and len({o.y for o in objects}) >= 6
    assert all(len({(o.x, o.y) for o in scene}) == len(scene) for scene in scenes)  # never stacked
    free = draw_scene(np.random.default_rng(11), grid=None)
    assert not np.allclose(
        np.array([o.x for o in free]) * POSITION_GRID - 0.5,
        np.round(np.array([o.x for o in free]) * POSITION_GRID - 0.5),
    )
