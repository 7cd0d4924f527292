"""Write the trust track's CellProfiler pipelines (workflow/resources/trust/*.cppipe) with the
cellprofiler_core API, as CellProfiler 4.2.8 saves them (`Version:5`). Run it with CellProfiler's own
interpreter (`make cellprofiler` builds it; never the torch environment):

    .cellprofiler/bin/python tools/build_cppipe.py [--out workflow/resources/trust] [--check]

Two inputs, one pipeline each (docs/trust/method.md, "CellProfiler morphology"):

- ``composite`` (the official code's, the default): one RGB composite per site, made with rxrx1-utils'
  channel colour map (:mod:`condeval.trust.morphology`), named ``DATA``. ColorToGray combines it into
  ``OrigGray``, on which everything is measured, and splits it; nuclei are found in ``NuclearStain``,
  blue less red and green (ImageMath), where only Hoechst (channel 1, drawn pure blue) remains.
- ``channels``: the six grey channels of a site (``..._w1.npy`` to ``..._w6.npy``), matched by the
  site's name; nuclei on w1 (Hoechst), cells on w3 (actin), measured on their mean, ``OrigGray``
  (ImageMath), so both inputs give the same columns at the same cost.

Then, as the paper's feature set (REFERENCE.md, "CellProfiler in the code"): Nuclei
(IdentifyPrimaryObjects), Cells (IdentifySecondaryObjects, propagation), Cytoplasm
(IdentifyTertiaryObjects); size/shape with Zernike, intensity, texture at scales 3/5/10 with 256 grey
levels, granularity, radial distribution in 4 bins, neighbours, area occupied; ExportToSpreadsheet with
Mean/Median/StDev aggregates, no file-name prefix, overwriting; only the Image table is exported (the
per-object tables are never read, and writing them took a fifth of a run).

Sites arrive as NumPy ``.npy`` files (float32 in [0, 1], written by
``condeval.trust.cellprofiler.write_inputs``): CellProfiler reads those in Python, where a PNG goes
through Bio-Formats in Java at 0.2 s a site, and gives the same features to the last digit. The Images
module keeps them by name (its "Images only" filter asks Bio-Formats, which does not list ``.npy``).

``--check`` writes nothing and exits 1 when a committed file differs from what this script builds.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

from cellprofiler_core.preferences import set_awt_headless, set_headless

set_headless()
set_awt_headless(True)

from cellprofiler.modules import (  # noqa: E402  (after set_headless, as CellProfiler requires)
    colortogray,
    exporttospreadsheet,
    identifyprimaryobjects,
    identifysecondaryobjects,
    identifytertiaryobjects,
    imagemath,
    measuregranularity,
    measureimageareaoccupied,
    measureobjectintensity,
    measureobjectintensitydistribution,
    measureobjectneighbors,
    measureobjectsizeshape,
    measuretexture,
)
from cellprofiler_core.modules import groups, images, metadata, namesandtypes  # noqa: E402
from cellprofiler_core.pipeline import Pipeline  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "workflow/resources/trust"
OBJECTS = ("Nuclei", "Cells", "Cytoplasm")
TEXTURE_SCALES = (3, 5, 10)
RADIAL_BINS = 4
# Nuclei span about 8-30 pixels in the composites at the configured side (docs/trust/departures.md): the
# miniature is drawn so that they do, and real RxRx1 at 256 pixels (1.3 um/pixel) has nuclei of 6-20.
NUCLEUS_DIAMETER = (6, 40)
CELL_EXPANSION = 12
THRESHOLD_RANGE = (0.1, 1.0)
CHANNEL_IMAGES = tuple(f"w{c}" for c in range(1, 7))
# condeval.trust.cellprofiler.IMAGE_SUFFIX (this script runs in CellProfiler's environment)
IMAGE_SUFFIX = ".npy"


def _inputs(kind: str) -> tuple[list, tuple[str, ...], str, str]:
    """Input modules, the images to measure, and the images nuclei and cells are found on."""
    image_module, groups_module = images.Images(), groups.Groups()
    image_module.filter_choice.value = "Custom"
    image_module.filter.value = f'and (file does endwith "{IMAGE_SUFFIX}")'
    meta, names = metadata.Metadata(), namesandtypes.NamesAndTypes()
    modules = [image_module, meta, names, groups_module]
    if kind == "composite":
        names.assignment_method.value = namesandtypes.ASSIGN_ALL
        names.single_load_as_choice.value = namesandtypes.LOAD_AS_COLOR_IMAGE
        names.single_image_provider.value = "DATA"
        to_gray = colortogray.ColorToGray()
        to_gray.image_name.value, to_gray.combine_or_split.value = "DATA", "Combine"
        to_gray.grayscale_name.value = "OrigGray"
        to_rgb = colortogray.ColorToGray()
        to_rgb.image_name.value, to_rgb.combine_or_split.value = "DATA", "Split"
        return modules + [to_gray, to_rgb, _nuclear_stain()], ("OrigGray",), "NuclearStain", "OrigGray"
    meta.wants_metadata.value = True
    method = meta.extraction_methods[0]
    method.file_regexp.value = r"^(?P<Site>.*)_w(?P<ChannelNumber>[1-6])" + re.escape(IMAGE_SUFFIX) + "$"
    names.assignment_method.value = namesandtypes.ASSIGN_RULES
    names.matching_choice.value = namesandtypes.MATCH_BY_METADATA
    for index, name in enumerate(CHANNEL_IMAGES):
        if index:
            names.add_assignment()
        assignment = names.assignments[index]
        assignment.rule_filter.value = f'and (file does endwith "_{name}{IMAGE_SUFFIX}")'
        assignment.image_name.value = name
        assignment.load_as_choice.value = namesandtypes.LOAD_AS_GRAYSCALE_IMAGE
    names.join.value = str([{name: "Site" for name in CHANNEL_IMAGES}])
    return modules + [_channel_mean()], ("OrigGray",), "w1", "w3"


def _nuclear_stain() -> imagemath.ImageMath:
    """Blue less red and green: of the six colours, only channel 1's (19, 0, 249) survives it, since
    channels 4 (45, 255, 252) and 5 (250, 0, 253), also blue, carry as much green or red."""
    stain = imagemath.ImageMath()
    stain.operation.value, stain.output_image_name.value = "Add", "NuclearStain"
    stain.truncate_low.value = True
    for index, (name, factor) in enumerate((("OrigBlue", 1.0), ("OrigRed", -1.0), ("OrigGreen", -1.0))):
        if index >= len(stain.images):
            stain.add_image()
        stain.images[index].image_name.value, stain.images[index].factor.value = name, factor
    return stain


def _channel_mean() -> imagemath.ImageMath:
    """The six channels' mean, named ``OrigGray`` as the composite's grey: the same measurements, the
    same column names, whichever input."""
    mean = imagemath.ImageMath()
    mean.operation.value, mean.output_image_name.value = "Average", "OrigGray"
    for index, name in enumerate(CHANNEL_IMAGES):
        if index >= len(mean.images):
            mean.add_image()
        mean.images[index].image_name.value = name
    return mean


def _objects(nuclear: str, cellular: str) -> list:
    nuclei = identifyprimaryobjects.IdentifyPrimaryObjects()
    nuclei.x_name.value, nuclei.y_name.value = nuclear, "Nuclei"
    nuclei.size_range.value = NUCLEUS_DIAMETER
    nuclei.threshold.threshold_scope.value = "Global"
    nuclei.threshold.global_operation.value = "Otsu"
    # A site with one or two cells is nearly all background: Otsu then splits the noise. A floor on the
    # threshold (stains run 0-1) keeps it on the stain, as CellProfiler's own examples do for sparse fields.
    nuclei.threshold.threshold_range.value = THRESHOLD_RANGE
    cells_threshold = THRESHOLD_RANGE
    cells = identifysecondaryobjects.IdentifySecondaryObjects()
    cells.x_name.value, cells.y_name.value, cells.image_name.value = "Nuclei", "Cells", cellular
    cells.method.value, cells.distance_to_dilate.value = "Propagation", CELL_EXPANSION
    cells.threshold.threshold_range.value = cells_threshold
    cytoplasm = identifytertiaryobjects.IdentifyTertiaryObjects()
    cytoplasm.secondary_objects_name.value, cytoplasm.primary_objects_name.value = "Cells", "Nuclei"
    cytoplasm.subregion_objects_name.value = "Cytoplasm"
    return [nuclei, cells, cytoplasm]


def _measurements(measured: tuple[str, ...]) -> list:
    size_shape = measureobjectsizeshape.MeasureObjectSizeShape()
    size_shape.objects_list.value, size_shape.calculate_zernikes.value = ", ".join(OBJECTS), True
    intensity = measureobjectintensity.MeasureObjectIntensity()
    intensity.images_list.value, intensity.objects_list.value = ", ".join(measured), ", ".join(OBJECTS)
    texture = measuretexture.MeasureTexture()
    texture.images_list.value, texture.objects_list.value = ", ".join(measured), ", ".join(OBJECTS)
    texture.gray_levels.value, texture.images_or_objects.value = 256, "Both"
    for index, scale in enumerate(TEXTURE_SCALES):
        if index:
            texture.add_scale()
        texture.scale_groups[index].scale.value = scale
    granularity = measuregranularity.MeasureGranularity()
    granularity.images_list.value = ", ".join(measured)
    granularity.wants_objects.value, granularity.objects_list.value = True, ", ".join(OBJECTS)
    radial = measureobjectintensitydistribution.MeasureObjectIntensityDistribution()
    radial.images_list.value = ", ".join(measured)
    for index, name in enumerate(OBJECTS):
        if index:
            radial.add_object()
        radial.objects[index].object_name.value = name
    radial.bin_counts[0].bin_count.value = RADIAL_BINS
    neighbours = measureobjectneighbors.MeasureObjectNeighbors()
    neighbours.object_name.value = neighbours.neighbors_name.value = "Cells"
    neighbours.distance_method.value = "Adjacent"
    area = measureimageareaoccupied.MeasureImageAreaOccupied()
    area.operand_choice.value, area.objects_list.value = "Objects", ", ".join(OBJECTS)
    return [size_shape, intensity, texture, granularity, radial, neighbours, area]


def _export() -> exporttospreadsheet.ExportToSpreadsheet:
    export = exporttospreadsheet.ExportToSpreadsheet()
    export.wants_prefix.value = False
    export.wants_overwrite_without_warning.value = True
    export.wants_aggregate_means.value = True
    export.wants_aggregate_medians.value = True
    export.wants_aggregate_std.value = True
    export.nan_representation.value = "NaN"
    # only Image.csv, all the analysis reads: the per-object tables cost ~0.4 s a site to write
    export.wants_everything.value = False
    export.object_groups[0].name.value = "Image"
    return export


def build(kind: str) -> Pipeline:
    """The pipeline for input ``kind`` ("composite" or "channels")."""
    inputs, measured, nuclear, cellular = _inputs(kind)
    pipeline = Pipeline()
    for module in [*inputs, *_objects(nuclear, cellular), *_measurements(measured), _export()]:
        module.set_module_num(len(pipeline.modules()) + 1)
        pipeline.add_module(module)
    return pipeline


def text(pipeline: Pipeline) -> str:
    """The `.cppipe` text (``DateRevision`` is CellProfiler's version, so the same build writes the same bytes)."""
    buffer = io.StringIO()
    pipeline.dump(buffer, save_image_plane_details=False)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    stale = []
    for kind in ("composite", "channels"):
        path = args.out / f"morphology_{kind}.cppipe"
        content = text(build(kind))
        if args.check:
            if not path.exists() or path.read_text() != content:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    if stale:
        print(f"stale (rerun tools/build_cppipe.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
