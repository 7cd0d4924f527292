"""The paper config's datasets in their release formats at their real sizes, with tiny counts.

:func:`write_rehearsal_data` writes every dataset that ``config/sources.yaml`` names for the config's
tracks: each HTTP download under ``serve_root/<host>/<url path>`` (the loopback server's layout, fetched
by the workflow's own fetch rules), each manual source at its config path under the working directory.
The pixels come from the project's worlds (:mod:`~condeval.datasets.miniworld` scenes with their
captions, :mod:`~condeval.datasets.faceworld` faces, :mod:`~condeval.datasets.cellworld` sites); the
layouts, field names, resolutions and channels are the releases':

- **COCO 2014**: ``annotations_trainval2014.zip`` (``annotations/captions_*`` and ``instances_*``),
  ``val2014.zip`` and ``train2014.zip`` of ``COCO_<split>2014_%012d.jpg`` at COCO's sizes (640 × 480,
  480 × 640, 640 × 427, ...), five captions per image;
- **FOIL-it** (over val2014 and train2014), **FOIL-nocaps** (``nocaps-val-foil.json``, OpenImages-sized
  JPEGs), **RichHF-18K** (``dev``/``test.tfrecord`` with 512 × 512 PNG heatmaps, Pick-a-Pic's prompt
  table and images), **Flickr8k-Expert**, **Polaris**, **VICR** and **Composite** (pickled DataFrames);
- **CelebA** (178 × 218 JPEGs and both lists) and **RxRx1** (``metadata.csv``, six 512 × 512 grey PNGs
  per site).

The counts follow the config (:func:`coco_image_counts`, :func:`foil_it_images`) or are the fewest that
give every rule of the paper DAG rows to work on (:data:`CELEBA_PER_CONDITION`, :data:`RXRX1_SITES`).
The same seed writes the same bytes: every item draws from its own generator, zip members carry a fixed
date, JPEG quality is fixed. File names do not depend on the seed, so a write with another seed replaces
the files of the last one rather than adding to them.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import multiprocessing
import struct
import uuid
import zipfile
import zlib
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import polars as pl
from PIL import Image

from condeval.core.conformal import conformal_rank
from condeval.core.fetch import config_value, read_catalog, resolve_sources
from condeval.core.io import atomic_path, write_parquet
from condeval.crc.miniature import noun_only_swap, rated_candidates
from condeval.crc.word_risk import min_calibration_units
from condeval.crel.image_to_text import FOLD_FRACTIONS, FOLDS
from condeval.datasets.celeba import IMAGE_FOLDER, PARTITIONS, all_conditions, write_celeba_lists
from condeval.datasets.cellworld import CELLS_DRAWN, write_cell_world
from condeval.datasets.faceworld import celeba_row, render_face, sample_face
from condeval.datasets.foil import normalize_caption
from condeval.datasets.miniworld import SHAPES, captions_for, corrupt_caption, draw_scene, render_scene
from condeval.trust.data import queried_conditions, real_table

__all__ = [
    "CELEBA_PER_CONDITION",
    "COCO_SIZES",
    "JUDGMENT_IMAGES",
    "NOCAPS_RECORDS",
    "RICH_HF_RECORDS",
    "RXRX1_SITES",
    "coco_image_counts",
    "fold_items",
    "foil_it_images",
    "write_rehearsal_data",
]

REPOSITORY = Path(__file__).resolve().parents[3]
SOURCES_SCHEMA = "workflow/schemas/sources.schema.yaml"
JPEG_QUALITY = 90
ZIP_DATE = (2014, 8, 16, 0, 0, 0)  # no clock in an archive: the same seed gives the same bytes

#: COCO 2014's usual (width, height): Flickr's 640-pixel long side, landscape and portrait, a few square.
COCO_SIZES = ((640, 480), (480, 640), (640, 427), (427, 640), (500, 375), (375, 500), (640, 424), (612, 612))
#: nocaps val (OpenImages) at its usual 1024-pixel long side.
NOCAPS_SIZES = ((1024, 768), (1024, 683), (768, 1024), (1024, 680), (683, 1024))
#: Flickr8k's 500-pixel long side.
FLICKR_SIZES = ((500, 375), (500, 333), (375, 500), (500, 334), (333, 500))
#: Pick-a-Pic v1's square generations.
PICK_A_PIC_SIDES = (512, 768)
CELEBA_SIZE = (178, 218)
RXRX1_SIDE = 512
HEATMAP_SIDE = 512

#: Images per COCO split at least; the config may ask for more (:func:`coco_image_counts`).
COCO_MIN_IMAGES = 16
#: Val images the FOIL-it test file covers, one original and one foil each.
FOIL_IT_TEST_IMAGES = 16
#: FOIL-nocaps records per domain: every domain of Table 2 has pairs.
NOCAPS_RECORDS = {"in": 2, "near": 6, "out": 4}
#: RichHF-18K records per file; dev calibrates, so it needs the word sweep's fewest units (9 at α = 0.3).
RICH_HF_RECORDS = {"dev": 12, "test": 12}
#: Images per judgment set, each with three candidates of 0-2 wrong words rated by three raters.
JUDGMENT_IMAGES = {"flickr8k": 8, "polaris": 8, "vicr": 10, "composite": 8}
CANDIDATE_ERRORS = 2
RATERS = 3
#: CelebA faces per attribute condition (all 16) and partition: the held-out support's five conditions
#: keep 6 of their 8 training faces each once 20% calibrate, the k = 5 neighbours Appendix J's kNN scorer
#: needs of every attribute value (a value held by one condition alone: male, smiling...); val and test give
#: every condition the two real rows outside the support that selection.min_real asks.
CELEBA_PER_CONDITION = {"train": 8, "val": 1, "test": 1}
#: (cell type, siRNA) -> (train sites, test sites), two sites a well, for ``trust.datasets.rxrx1.subset``
#: {held_out_pairs: 4, n_each: 2, min_count: 4}. The four pairs with 12 training sites are held out; of
#: them the two with test sites rank first and are the unseen queries (a HEPG2 control, a HUVEC siRNA).
#: The seen queries are RPE's siRNA and U2OS's control. Every pair of either support has 8 training sites, so
#: every value of either attribute keeps at least 6 fitting rows once 20% calibrate: Appendix J's kNN scorer
#: needs k = 5 of each. The 1138 pairs keep HEPG2 and HUVEC in the held-out support (the scorer refuses a value
#: it never fitted). Every queried pair has two test sites, the real rows the full support's selection
#: compares against.
RXRX1_SITES = {
    ("HEPG2", 1108): (12, 2),
    ("HUVEC", 1): (12, 2),
    ("HEPG2", 1): (12, 0),
    ("HUVEC", 1108): (12, 0),
    ("RPE", 1): (8, 2),
    ("U2OS", 1108): (8, 2),
    ("HEPG2", 1138): (8, 0),
    ("HUVEC", 1138): (8, 0),
}

_COCO_INFO = {
    "description": "This is stable 1.0 version of the 2014 MS COCO dataset.",
    "url": "http://mscoco.org",
    "version": "1.0",
    "year": 2014,
    "contributor": "Microsoft COCO group",
    "date_created": "2015-01-27 09:11:52.357475",
}
_COCO_LICENSES = [
    {
        "url": "http://creativecommons.org/licenses/by-nc-sa/2.0/",
        "id": 1,
        "name": "Attribution-NonCommercial-ShareAlike License",
    },
    {"url": "http://creativecommons.org/licenses/by-nc/2.0/", "id": 2, "name": "Attribution-NonCommercial License"},
    {"url": "http://creativecommons.org/licenses/by/2.0/", "id": 4, "name": "Attribution License"},
]


# ------------------------------------------------------------------------------------ placement
@dataclass
class _Destinations:
    """Where a dataset's files go: a manual source's config path under ``workdir``, a download's file
    under ``serve_root``; remembers each download written."""

    config: Mapping
    workdir: Path
    serve_root: Path
    urls: tuple[str, ...]
    served: dict[str, Path] = field(default_factory=dict)

    def manual(self, key: str) -> Path:
        """The path at config ``key`` under the working directory."""
        return self.workdir / config_value(self.config, key, "rehearsal data")

    def download(self, file_name: str) -> Path | None:
        """The served file of the needed URL ending in ``/file_name``; None when the config needs none."""
        url = next((url for url in self.urls if url.rsplit("/", 1)[-1] == file_name), None)
        if url is None:
            return None
        parts = urlsplit(url)
        self.served[url] = self.serve_root / parts.netloc / parts.path.lstrip("/")
        return self.served[url]


def _needed_urls(config: Mapping) -> tuple[str, ...]:
    """Every HTTP URL of the catalogue (``fetch.sources``) that the config's tracks fetch."""
    catalog = read_catalog(REPOSITORY / config["fetch"]["sources"], REPOSITORY / SOURCES_SCHEMA)
    sources = resolve_sources(catalog, config)
    return tuple(item["url"] for source in sources if source.kind == "http" for item in source.spec["http"])


# -------------------------------------------------------------------------------------- writing
def _rng(seed: int, dataset: str, *index: int) -> np.random.Generator:
    """The generator of one item: the same item draws the same whatever else is written."""
    return np.random.default_rng([seed, zlib.crc32(dataset.encode()), *index])


def _name(dataset: str, index: int, digits: int = 16) -> str:
    """A hex name of one item (OpenImages ids, Flickr secrets, uuids), the same for every seed."""
    return hashlib.sha256(f"{dataset}/{index}".encode()).hexdigest()[:digits]


def _uuid(dataset: str, index: int) -> str:
    return str(uuid.UUID(hex=_name(dataset, index, 32), version=4))


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _json(document: object) -> bytes:
    return json.dumps(document).encode()


def _write_bytes(path: Path, payload: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(payload)


def _write_zip(path: Path, members: Mapping[str, bytes | None]) -> None:
    """A zip of ``members`` (name -> bytes; None: a folder entry) in name order, each dated :data:`ZIP_DATE`.

    JPEGs are stored (deflating them gains nothing), the rest deflated.
    """
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w") as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.create_system = 3  # unix, whatever writes it
            info.external_attr = (0o40755 << 16) | 0x10 if members[name] is None else 0o100644 << 16
            stored = members[name] is None or name.endswith(".jpg")
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            archive.writestr(info, members[name] or b"")


def _size(rng: np.random.Generator, sizes: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    return sizes[int(rng.integers(len(sizes)))]


def _scene(rng: np.random.Generator, size: tuple[int, int]):
    """A mini-world scene (its objects) drawn on a square of the long side, centre-cropped to ``size``."""
    objects = draw_scene(rng)
    side = max(size)
    left, top = (side - size[0]) // 2, (side - size[1]) // 2
    return objects, render_scene(objects, rng, side).crop((left, top, left + size[0], top + size[1]))


def _sentence(tokens: list[str], key: int) -> str:
    """Tokens as people type a caption: capitalised, mostly with a full stop, now and then a trailing space
    (both occur in COCO and both must survive the loaders' normalisation); ``key`` picks which."""
    text = " ".join(tokens)
    text = text[0].upper() + text[1:] + ("" if key % 5 == 0 else ".")
    return text + (" " if key % 7 == 0 else "")


# ----------------------------------------------------------------------------------------- counts
def fold_items(alpha: float) -> int:
    """Fewest CReL items for which every fold is non-empty and the calibration fold calibrates at ``alpha``.

    :func:`~condeval.crel.image_to_text.assign_folds` gives the calibration fold ``floor(n · 0.05)`` items,
    and :func:`~condeval.core.conformal.conformal_rank` needs ``⌈1/α⌉ − 1`` of them: 180 at α = 0.1.
    """
    points = next(n for n in itertools.count(1) if _calibrates(n, alpha))
    calibration = FOLD_FRACTIONS[FOLDS.index("cal")]
    return next(
        n
        for n in itertools.count(1)
        if min(int(np.floor(n * f)) for f in FOLD_FRACTIONS[1:]) >= 1 and int(np.floor(n * calibration)) >= points
    )


def _calibrates(n: int, alpha: float) -> bool:
    try:
        conformal_rank(n, alpha)
    except ValueError:
        return False
    return True


def foil_it_images(config: Mapping) -> dict[str, int]:
    """Images of each FOIL-it file: the calibrating one holds the word sweep's fewest calibration units
    (:func:`~condeval.crc.word_risk.min_calibration_units` at the smallest α) at ``calibration_fraction``."""
    words = config["crc"]["words"]
    units = max(min_calibration_units(alpha, words["delta"]) for alpha in words["alphas"])
    calibrating = math.ceil(units / words["calibration_fraction"])
    if words["calibration_source"] == "train":
        return {"train": max(COCO_MIN_IMAGES, calibrating), "test": FOIL_IT_TEST_IMAGES}
    return {"test": max(FOIL_IT_TEST_IMAGES, calibrating + 1)}


def coco_image_counts(config: Mapping) -> dict[str, int]:
    """Images per COCO 2014 split that the config's rules need.

    Val: CReL image-to-text folds every val image (:func:`fold_items` at its α), text-to-image draws its
    ``items`` from them, FOIL-it's test file covers some. Train: FOIL-it's train file, when it calibrates.
    """
    crel, crc = config.get("crel", {}), config.get("crc", {})
    val, train = [COCO_MIN_IMAGES], [COCO_MIN_IMAGES]
    if "image_to_text" in crel:
        val.append(fold_items(crel["image_to_text"]["alpha"]))
    if "text_to_image" in crel:
        val.append(crel["text_to_image"]["items"])
    if "words" in crc:
        foil = foil_it_images(config)
        val.append(foil["test"])
        train.append(foil.get("train", 0))
    return {"val": max(val), "train": max(train)}


# ------------------------------------------------------------------------------------------- COCO
def _coco_image_ids(counts: Mapping[str, int], seed: int) -> dict[str, list[int]]:
    """Sparse image ids as COCO's, unique across the splits."""
    ids = _rng(seed, "coco-ids").choice(581_929, size=sum(counts.values()), replace=False) + 1
    bounds = np.cumsum([0, *counts.values()])
    return {split: sorted(ids[a:b].tolist()) for split, a, b in zip(counts, bounds[:-1], bounds[1:], strict=True)}


def _coco_image(split: str, image_id: int, seed: int) -> tuple[dict, list, bytes]:
    """One COCO image: its record, its five captions' annotations and its JPEG."""
    rng = _rng(seed, "coco", image_id)
    width, height = _size(rng, COCO_SIZES[:-1])  # not the square one: a transposed size must show
    objects, image = _scene(rng, (width, height))
    file_name = f"COCO_{split}2014_{image_id:012d}.jpg"
    day, hour, minute, second = rng.integers((10, 10, 10, 10), (29, 24, 60, 60))
    farm, server = rng.integers((1, 1000), (10, 9000))
    photo = f"{rng.integers(10**9, 10**10)}_{_name('flickr', image_id, 10)}"
    record = {
        "license": int(rng.choice([1, 2, 4])),
        "file_name": file_name,
        "coco_url": f"http://images.cocodataset.org/{split}2014/{file_name}",
        "height": height,
        "width": width,
        "date_captured": f"2013-11-{day} {hour}:{minute}:{second}",
        "flickr_url": f"http://farm{farm}.staticflickr.com/{server}/{photo}_z.jpg",
        "id": image_id,
    }
    annotations = [
        {"image_id": image_id, "id": 10 * image_id + k, "caption": _sentence(caption.tokens, 10 * image_id + k)}
        for k, caption in enumerate(captions_for(objects, rng))
    ]
    return record, annotations, _jpeg(image)


def _coco_split(split: str, image_ids: list[int], seed: int) -> tuple[dict, dict[str, bytes | None]]:
    """A split's captions document and its images by zip member name."""
    images, annotations, members = [], [], {f"{split}2014/": None}
    for image_id in image_ids:
        record, captions, jpeg = _coco_image(split, image_id, seed)
        images.append(record)
        annotations += captions
        members[f"{split}2014/{record['file_name']}"] = jpeg
    return {"info": _COCO_INFO, "images": images, "licenses": _COCO_LICENSES, "annotations": annotations}, members


def _instances(captions: Mapping) -> dict:
    """An ``instances_*`` document beside a captions one: its images and the categories (no boxes)."""
    categories = [{"supercategory": "shape", "id": k, "name": shape} for k, shape in enumerate(SHAPES, start=1)]
    return dict(captions) | {"annotations": [], "categories": categories}


def _write_coco(destinations: _Destinations, counts: Mapping[str, int], seed: int) -> dict[str, dict]:
    """Write COCO 2014's three zips; returns each split's captions document (FOIL-it is made from them).

    ``annotations_trainval2014.zip`` holds both captions files and both instances files: the fetch rule
    must take the two it needs out of more, as from the real one.
    """
    documents, annotations = {}, {"annotations/": None}
    for split, image_ids in _coco_image_ids(counts, seed).items():
        documents[split], members = _coco_split(split, image_ids, seed)
        annotations[f"annotations/captions_{split}2014.json"] = _json(documents[split])
        annotations[f"annotations/instances_{split}2014.json"] = _json(_instances(documents[split]))
        served = destinations.download(f"{split}2014.zip")
        if served is not None:
            _write_zip(served, members)
    served = destinations.download("annotations_trainval2014.zip")
    if served is not None:
        _write_zip(served, annotations)
    return documents


# -------------------------------------------------------------------------------- FOIL-it and nocaps
def _foil_pair(captions: list[dict], seed: int) -> list[dict]:
    """The first of an image's captions that a one-noun foil exists for, and that foil, sharing its id.

    FOIL-it marks an original's target and foil word ``ORIG``.
    """
    for caption in sorted(captions, key=lambda c: c["id"]):
        words = normalize_caption(caption["caption"])
        foiled = noun_only_swap(words, _rng(seed, "foil-it", caption["id"]))
        if foiled is not None:
            tokens, k = foiled
            common = {"id": caption["id"], "image_id": caption["image_id"]}
            return [
                common | {"caption": caption["caption"], "foil": False, "target_word": "ORIG", "foil_word": "ORIG"},
                common
                | {
                    "caption": _sentence(tokens, caption["id"]),
                    "foil": True,
                    "target_word": words[k],
                    "foil_word": tokens[k],
                },
            ]
    raise ValueError(f"image {captions[0]['image_id']}: no caption names a shape to foil")


def _foil_document(coco: Mapping, n_images: int, seed: int) -> dict:
    """FOIL-it over the first ``n_images`` images of a COCO captions document, in COCO's layout."""
    images = coco["images"][:n_images]
    by_image: dict[int, list] = {}
    for annotation in coco["annotations"]:
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    annotations = [row for image in images for row in _foil_pair(by_image[image["id"]], seed)]
    return {"info": coco["info"], "images": images, "licenses": coco["licenses"], "annotations": annotations}


def _write_foil_it(destinations: _Destinations, coco: Mapping[str, dict], seed: int) -> None:
    """FOIL-it's test file over val2014 and, when the config names it, its train file over train2014."""
    counts = foil_it_images(destinations.config)
    _write_bytes(destinations.manual("crc.data.foil_it.file"), _json(_foil_document(coco["val"], counts["test"], seed)))
    if "train" in destinations.config["crc"]["data"]["foil_it"]:
        document = _foil_document(coco["train"], counts.get("train", COCO_MIN_IMAGES), seed)
        _write_bytes(destinations.manual("crc.data.foil_it.train"), _json(document))


def _nocaps_record(domain: str, index: int, seed: int, images: Path) -> dict:
    """One FOIL-nocaps record (ALOHa's fields) and its OpenImages-sized JPEG, named by a 16-hex image id."""
    rng = _rng(seed, "foil-nocaps", index)
    objects, image = _scene(rng, _size(rng, NOCAPS_SIZES))
    image_path = f"{_name('openimages', index)}.jpg"
    _write_bytes(images / image_path, _jpeg(image))
    captions = [caption.tokens for caption in captions_for(objects, rng, n=11)]  # a baseline, ten references
    baseline, (tokens, k) = next((c, swap) for c in captions if (swap := noun_only_swap(c, rng)) is not None)
    return {
        "image_path": image_path,
        "references": [_sentence(c, index + n) for n, c in enumerate(captions) if c is not baseline],
        "baseline": " ".join(baseline),
        "foil": " ".join(tokens),
        "replacement": [baseline[k], tokens[k]],
        "domain": domain,
    }


def _write_foil_nocaps(destinations: _Destinations, seed: int) -> None:
    """``nocaps-val-foil.json`` (a list of records, served) and its images (placed by hand)."""
    images = destinations.manual("crc.data.foil_nocaps.images")
    domains = [domain for domain, n in NOCAPS_RECORDS.items() for _ in range(n)]
    records = [_nocaps_record(domain, index, seed, images) for index, domain in enumerate(domains)]
    served = destinations.download("nocaps-val-foil.json")
    if served is not None:
        _write_bytes(served, json.dumps(records, indent=2).encode())


# ------------------------------------------------------------------------------------- RichHF-18K
def _heatmap(rng: np.random.Generator, blobs: int) -> bytes:
    """A RichHF heatmap: 512 × 512 grey PNG, 0 where nothing is marked, Gaussian blobs where annotators clicked."""
    yy, xx = np.mgrid[0:HEATMAP_SIDE, 0:HEATMAP_SIDE] / HEATMAP_SIDE
    heat = np.zeros((HEATMAP_SIDE, HEATMAP_SIDE))
    for cx, cy, radius in rng.uniform((0.1, 0.1, 0.03), (0.9, 0.9, 0.1), size=(blobs, 3)):
        heat = np.maximum(heat, np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * radius**2)))
    return _png(Image.fromarray(np.rint(255 * heat).astype(np.uint8), mode="L"))


def _example(features: Mapping[str, float | bytes]) -> bytes:
    """A ``tf.train.Example`` of floats and bytes, its map serialised in key order (the same bytes in any
    process)."""
    from tfrecord import example_pb2

    def feature(value):
        if isinstance(value, bytes):
            return example_pb2.Feature(bytes_list=example_pb2.BytesList(value=[value]))
        return example_pb2.Feature(float_list=example_pb2.FloatList(value=[value]))

    example = example_pb2.Example(features=example_pb2.Features(feature={k: feature(v) for k, v in features.items()}))
    return example.SerializeToString(deterministic=True)


def _tfrecord(payloads: list[bytes]) -> bytes:
    """Records in TFRecord framing: length, its masked CRC-32C, payload, its masked CRC-32C."""
    from tfrecord.writer import TFRecordWriter

    framed = []
    for payload in payloads:
        length = struct.pack("<Q", len(payload))
        framed += [length, TFRecordWriter.masked_crc(length), payload, TFRecordWriter.masked_crc(payload)]
    return b"".join(framed)


def _rich_hf_record(split: str, index: int, seed: int, images: Path) -> tuple[bytes, list[dict]]:
    """One RichHF-18K example and its Pick-a-Pic comparison rows (one or two); writes the image.

    The image file holds JPEG bytes under the ``.png`` name RichHF gives it: Pick-a-Pic ships
    ``jpg_0``/``jpg_1`` bytes, and the catalogue places them one file per RichHF filename.
    """
    rng = _rng(seed, f"rich-hf-{split}", index)
    side = PICK_A_PIC_SIDES[int(rng.integers(len(PICK_A_PIC_SIDES)))]
    objects, image = _scene(rng, (side, side))
    uid = _uuid(f"pick-a-pic-{split}", index)
    filename = f"{'val' if split == 'dev' else split}/{uid}.png"
    _write_bytes(images / filename, _jpeg(image))
    words, errors = corrupt_caption(captions_for(objects, rng, n=1)[0].tokens, int(rng.integers(0, 3)), rng)
    prompt = _sentence(words, index).replace(" and ", ", and ")  # Pick-a-Pic prompts carry the delimiters
    example = _example(
        {
            "filename": filename.encode(),
            "aesthetics_score": rng.uniform(1, 5),
            "artifact_score": rng.uniform(1, 5),
            "misalignment_score": 5.0 - 1.5 * sum(errors),
            "overall_score": rng.uniform(1, 5),
            "artifact_map": _heatmap(rng, int(rng.integers(0, 3))),
            "misalignment_map": _heatmap(rng, sum(errors)),
            "prompt_misalignment_label": " ".join(str(1 - e) for e in errors).encode(),
        }
    )
    # the images it was compared with (unrated); some images meet two, as in Pick-a-Pic
    rivals = [_uuid(f"pick-a-pic-{split}-rival-{k}", index) for k in range(1 + (index % 3 == 0))]
    rows = [
        {"caption": prompt, "image_0_uid": a, "image_1_uid": b}
        for a, b in ((uid, rival) if rng.random() < 0.5 else (rival, uid) for rival in rivals)
    ]
    return example, rows


def _write_rich_hf(destinations: _Destinations, seed: int) -> None:
    """``dev.tfrecord`` and ``test.tfrecord`` (served), Pick-a-Pic's prompt table and the images (placed)."""
    images = destinations.manual("crc.data.rich_hf.images")
    rows = []
    for split, n in RICH_HF_RECORDS.items():
        examples, comparisons = zip(*(_rich_hf_record(split, index, seed, images) for index in range(n)), strict=True)
        rows += [row for pairs in comparisons for row in pairs]
        served = destinations.download(f"{split}.tfrecord")
        if served is not None:
            _write_bytes(served, _tfrecord(list(examples)))
    write_parquet(pl.DataFrame(rows), destinations.manual("crc.data.rich_hf.prompts"))


# -------------------------------------------------------------------------------------- judgments
@dataclass(frozen=True)
class _Judged:
    """One judged image: a name, its JPEG, its references and its candidates with their raters' 1-4 ratings."""

    stem: str
    jpeg: bytes
    references: list[str]
    candidates: list[tuple[str, list[float]]]


def _judged_images(name: str, n: int, seed: int, sizes: tuple[tuple[int, int], ...]) -> list[_Judged]:
    """``n`` scenes, each judged on three candidates made from its first caption (the miniature's raters:
    4 − wrong words, with noise), the other five its references."""
    judged = []
    for index in range(n):
        rng = _rng(seed, name, index)
        objects, image = _scene(rng, _size(rng, sizes))
        first, *others = [caption.tokens for caption in captions_for(objects, rng, n=6)]
        rated = rated_candidates(first, rng, RATERS, CANDIDATE_ERRORS)
        candidates = [(_sentence(text.split(), k), ratings) for k, (text, ratings) in enumerate(rated)]
        references = [_sentence(tokens, k) for k, tokens in enumerate(others, start=1)]
        judged.append(_Judged(_name(name, index, 10), _jpeg(image), references, candidates))
    return judged


def _flickr8k(judged: list[_Judged], images: Path) -> bytes:
    """``flickr8k.json`` as jmhessel/clipscore builds it: by image id, three expert ratings per caption."""
    document = {}
    for item in judged:
        image_id = f"{int(item.stem, 16) % 10**10:010d}_{item.stem}"
        path = f"Flicker8k_Dataset/{image_id}.jpg"  # the release's folder name, misspelt as it is
        _write_bytes(images / path, item.jpeg)
        judgements = [
            {"image_id": image_id, "image_path": path, "caption": text, "rating": float(rating)}
            for text, ratings in item.candidates
            for rating in ratings
        ]
        document[image_id] = {
            "human_judgement": judgements,
            "image_id": image_id,
            "image_path": path,
            "ground_truth": item.references,
        }
    return _json(document)


def _polaris(judged: list[_Judged], images: Path) -> pl.DataFrame:
    """Polaris' table with the Hugging Face image struct (bytes and path); scores on [0, 1]."""
    rows = []
    for item in judged:
        path = f"images/{item.stem}.jpg"
        _write_bytes(images / path, item.jpeg)
        rows += [
            {
                "refs": item.references,
                "cand": text,
                "img": {"bytes": item.jpeg, "path": path},
                "human_score": (float(np.mean(ratings)) - 1) / 3,
            }
            for text, ratings in item.candidates
        ]
    image = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    return pl.DataFrame(
        rows, schema={"refs": pl.List(pl.String), "cand": pl.String, "img": image, "human_score": pl.Float64}
    )


def _bundle_frame(judged: list[_Judged], images: Path, name: str):
    """The CLIPScore bundle's pickled frame: VICR with every rating and a val/test ``subset``, Composite
    with one mean score and the references; object columns, as pandas wrote them before string dtypes."""
    import pandas as pd

    rows = []
    for position, item in enumerate(judged):
        path = f"images/{item.stem}.jpg"
        _write_bytes(images / path, item.jpeg)
        subset = "val" if position < len(judged) // 5 else "test"
        for text, ratings in item.candidates:
            extra = (
                {"human_scores": list(ratings), "subset": subset}
                if name == "vicr"
                else {"human_scores": float(np.mean(ratings)), "refs": item.references}
            )
            rows.append({"image_path": path, "candidates": text} | extra)
    return pd.DataFrame({column: pd.Series([row[column] for row in rows], dtype=object) for column in rows[0]})


def _write_judgments(destinations: _Destinations, seed: int) -> None:
    """Flickr8k-Expert, Polaris, VICR and Composite, each in its release format with its images."""
    for name, section in destinations.config["crc"]["data"]["judgments"].items():
        base = f"crc.data.judgments.{name}"
        file, images = destinations.manual(f"{base}.file"), destinations.manual(f"{base}.images")
        judged = _judged_images(name, JUDGMENT_IMAGES[name], seed, FLICKR_SIZES if name == "flickr8k" else COCO_SIZES)
        if section["format"] == "flickr8k":
            _write_bytes(file, _flickr8k(judged, images))
        elif section["format"] == "polaris":
            write_parquet(_polaris(judged, images), file)
        else:
            with atomic_path(file) as tmp:
                _bundle_frame(judged, images, name).to_pickle(tmp)


# ---------------------------------------------------------------------------------- CelebA, RxRx1
def _face_jpeg(attributes: tuple[int, ...], rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """A 178 × 218 aligned face with ``attributes`` and its 40 CelebA values.

    Drawn at half the height and enlarged: the face world draws at four times its side, 0.1 s a face at
    218 pixels; the file is CelebA's size all the same.
    """
    face = sample_face(rng, attributes)
    width, height = CELEBA_SIZE
    square = render_face(face, rng, height // 2).resize((height, height), Image.BICUBIC)
    left = (height - width) // 2
    return _jpeg(square.crop((left, 0, left + width, height))), celeba_row(face)


def _write_celeba(root: Path, seed: int) -> None:
    """CelebA: ``img_align_celeba/%06d.jpg`` in partition order (train, val, test, as the release numbers
    them), :data:`CELEBA_PER_CONDITION` faces of each of the 16 conditions in each, and both lists."""
    names, rows, partitions = [], [], []
    for code, partition in PARTITIONS.items():
        conditions = np.repeat(all_conditions(), CELEBA_PER_CONDITION[partition], axis=0)
        for attributes in _rng(seed, "celeba-order", code).permutation(conditions):
            name = f"{len(names) + 1:06d}.jpg"
            jpeg, row = _face_jpeg(tuple(int(v) for v in attributes), _rng(seed, "celeba", len(names)))
            _write_bytes(root / IMAGE_FOLDER / name, jpeg)
            names.append(name)
            rows.append(row)
            partitions.append(code)
    write_celeba_lists(root, names, np.stack(rows), partitions)


def _write_rxrx1(root: Path, seed: int, subset: Mapping) -> None:
    """RxRx1: the cell world's 512 × 512 six-channel sites of :data:`RXRX1_SITES` and ``metadata.csv``.

    The release's split runs by experiment, so a well's two sites share it; here each pair's first wells
    train and its last test. The cell world's ground-truth cell counts, no part of RxRx1, are removed.

    Raises
    ------
    ValueError
        If ``subset`` (``trust.datasets.rxrx1.subset``) finds no seen or unseen queries in these sites.
    """
    sites = {pair: train + test for pair, (train, test) in RXRX1_SITES.items()}
    metadata = write_cell_world(root, sorted({sirna for _, sirna in sites}), sites, seed, side=RXRX1_SIDE)
    (root / CELLS_DRAWN).unlink()
    trains = pl.DataFrame([{"cell_type": c, "sirna_id": s, "n_train": n} for (c, s), (n, _) in RXRX1_SITES.items()])
    first_wells = pl.int_range(pl.len()).over("cell_type", "sirna_id") < pl.col("n_train")
    metadata = metadata.join(trains, on=["cell_type", "sirna_id"], maintain_order="left").with_columns(
        pl.when(first_wells).then(pl.lit("train")).otherwise(pl.lit("test")).alias("dataset")
    )
    with atomic_path(root / "metadata.csv") as tmp:
        metadata.drop("n_train").write_csv(tmp)
    try:
        queried_conditions("rxrx1", real_table("rxrx1", root), **subset)
    except ValueError as error:
        raise ValueError(
            f"config key 'trust.datasets.rxrx1.subset' {dict(subset)}: {error} in the rehearsal's "
            f"RxRx1 sites (condeval.rehearsal.data.RXRX1_SITES)"
        ) from None


# ------------------------------------------------------------------------------------------ entry
def write_rehearsal_data(config: Mapping, workdir: Path, serve_root: Path, seed: int = 0) -> dict[str, Path]:
    """Write every dataset the config's tracks read, in its release format at its real size.

    Parameters
    ----------
    config : mapping
        The merged config (``config/paper.yaml``, ``config/allow_pickles.yaml``, ``config/rehearsal.yaml``);
        its ``fetch.sources`` catalogue says which source is downloaded and which is placed by hand.
    workdir : path
        The rehearsal's working folder: each manual source lands at its config path under it.
    serve_root : path
        The loopback server's folder: each download lands at ``<serve_root>/<host>/<url path>``.
    seed : int
        The same seed writes byte-identical files.

    Returns
    -------
    dict
        ``{url: served file}`` for every HTTP download of the catalogue that the config's tracks need.

    Raises
    ------
    ValueError
        If the catalogue names a download no writer here makes, or the RxRx1 subset finds no queries.
    """
    destinations = _Destinations(config, Path(workdir), Path(serve_root), _needed_urls(config))
    datasets = config.get("trust", {}).get("datasets", {})
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        # RxRx1's sites take most of the time, in one draw sequence: written beside the rest, on the other core
        rxrx1 = (
            pool.submit(
                _write_rxrx1,
                destinations.manual("trust.datasets.rxrx1.root"),
                seed,
                datasets["rxrx1"].get("subset", {}),
            )
            if "rxrx1" in datasets
            else None
        )
        _write_the_rest(config, destinations, seed)
        if rxrx1 is not None:
            rxrx1.result()
    unwritten = sorted(set(destinations.urls) - set(destinations.served))
    if unwritten:
        raise ValueError(f"{config['fetch']['sources']}: no rehearsal writer makes {unwritten}")
    return dict(destinations.served)


def _write_the_rest(config: Mapping, destinations: _Destinations, seed: int) -> None:
    """Every dataset of :func:`write_rehearsal_data` but RxRx1."""
    coco = _write_coco(destinations, coco_image_counts(config), seed) if "coco" in config else {}
    if "crc" in config:
        _write_foil_it(destinations, coco, seed)
        _write_foil_nocaps(destinations, seed)
        _write_rich_hf(destinations, seed)
        _write_judgments(destinations, seed)
        if config["crc"]["tagger"]["kind"] == "stanza":
            from condeval.rehearsal.stanza_models import write_stanza_models

            write_stanza_models(destinations.manual("crc.tagger.model_dir"), seed=seed)
    if "celeba" in config.get("trust", {}).get("datasets", {}):
        _write_celeba(destinations.manual("trust.datasets.celeba.root"), seed)
