"""Write config/README.md, the reference of every config key, from the schemas in workflow/schemas/.

Each key is one row: its dotted path (``<name>`` where the key is yours to choose, ``[]`` for a list's
items), what it takes, whether it is required, its default and the schema's description. The schemas
are the single source: edit a description there, then rerun

    python tools/config_reference.py            (write config/README.md)
    python tools/config_reference.py --check    (exit 1 if config/README.md is stale; tests/test_config_reference.py)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "workflow/schemas"
TARGET = REPO / "config/README.md"
#: The workflow config's sections, each with its schema; the top level (config.schema.yaml) first.
SECTIONS = {
    "": "config.schema.yaml",
    "coco": "coco.schema.yaml",
    "encoders": "encoders.schema.yaml",
    "crel": "crel.schema.yaml",
    "crc": "crc.schema.yaml",
    "trust": "trust.schema.yaml",
}
HEADER = """# Config reference

Generated from `workflow/schemas/` by `python tools/config_reference.py`: edit the schemas, not this
file. `config/config.yaml` is the offline default, `config/paper.yaml` the papers' settings (with
`config/allow_pickles.yaml` to trust the pickled benchmarks), `config/rehearsal.yaml` the rehearsal's
overlay; every config is checked against these schemas before any job (docs/workflow.md#configs).
Each track is a top-level section and runs only when the config has it. `<name>`: a key of your
choosing; `[]`: the items of a list.
"""


def _resolve(node: Mapping, schema: Mapping) -> Mapping:
    """``node`` with a local ``$ref`` (``#/definitions/...``) replaced by its target and its ``allOf`` members
    merged in, the node's own keys winning."""
    while "$ref" in node:
        target = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    for member in node.get("allOf", []):
        member = _resolve(member, schema)
        node = {
            **member,
            **node,
            "properties": {**member.get("properties", {}), **node.get("properties", {})},
            "required": [*member.get("required", []), *node.get("required", [])],
        }
    return node


def _free_form(node: Mapping) -> bool:
    """An object whose keys the schema leaves open (keyword arguments passed on as they are)."""
    return node.get("type") == "object" and not node.get("properties") and "additionalProperties" not in node


def _kind(node: Mapping) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{value}`" for value in node["enum"])
    if _free_form(node):
        return "object, free-form"
    kind = node.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind]
    words = "/".join(str(k) for k in kinds if k)
    bounds = [
        f"{op} {node[key]}"
        for key, op in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
        if key in node
    ]
    return ", ".join([words or "any", *bounds])


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def rows(node: Mapping, schema: Mapping, path: str, required: bool) -> Iterator[tuple[str, str, str, str, str]]:
    """(key, kind, required, default, description) of ``node`` and everything under it, depth first."""
    node = _resolve(node, schema)
    if path:
        default = f"`{node['default']}`" if "default" in node else ""
        yield path, _kind(node), "yes" if required else "", default, _cell(node.get("description", ""))
    needed = set(node.get("required", []))
    for key, child in node.get("properties", {}).items():
        yield from rows(child, schema, f"{path}.{key}" if path else key, key in needed)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from rows(extra, schema, f"{path}.<name>" if path else "<name>", False)
    items = node.get("items")
    if isinstance(items, Mapping) and (items.get("properties") or "$ref" in items):
        resolved = _resolve(items, schema)
        if resolved.get("properties"):
            yield from rows(resolved, schema, f"{path}[]", False)


def reference() -> str:
    """The whole of config/README.md."""
    parts = [HEADER]
    for section, file in SECTIONS.items():
        schema = yaml.safe_load((SCHEMAS / file).read_text())
        title = f"`{section}`" if section else "Top level"
        parts.append(f"\n## {title}\n\n{_cell(schema.get('description', ''))} (`workflow/schemas/{file}`)\n")
        parts.append("| key | takes | required | default | what it is |\n|---|---|---|---|---|")
        top = {key: value for key, value in schema.items() if key != "description"}
        for key, kind, required, default, description in rows(top, schema, section, False):
            if key == section:
                continue
            parts.append(f"| `{key}` | {kind} | {required} | {default} | {description} |")
    return "\n".join(parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if config/README.md is stale; write nothing")
    text = reference()
    if parser.parse_args().check:
        if TARGET.read_text() != text:
            print(f"{TARGET} is stale: python tools/config_reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
