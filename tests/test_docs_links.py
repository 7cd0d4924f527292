"""Every relative link and #anchor of README.md and every page under docs/ resolves (GitHub's anchor rules)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


def github_anchor(title: str) -> str:
    """The anchor GitHub gives a heading: link text kept, lowercase, punctuation dropped, spaces to -."""
    text = LINK.sub(lambda m: m["text"], title).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _prose_lines(path: Path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated titles numbered -1, -2 as GitHub does."""
    found, repeats = set(), {}
    for _, line in _prose_lines(path):
        if match := HEADING.match(line):
            anchor = github_anchor(match["title"])
            found.add(f"{anchor}-{repeats[anchor]}" if anchor in repeats else anchor)
            repeats[anchor] = repeats.get(anchor, 0) + 1
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: target`` for each relative link of ``path`` whose file or anchor does not exist."""
    broken = []
    for number, line in _prose_lines(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match["target"]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
                broken.append(f"{path.relative_to(root)}:{number}: {target}")
    return broken


def test_github_anchor_follows_githubs_rules():
    assert github_anchor("Image-to-text (CReL Section 4.2) on a miniature COCO world") == (
        "image-to-text-crel-section-42-on-a-miniature-coco-world"
    )
    assert github_anchor("Benchmark C: the hot spots (`make bench-crc`)") == "benchmark-c-the-hot-spots-make-bench-crc"
    assert github_anchor("Changing α") == "changing-α"
    assert github_anchor("Tables 1–5 [here](x.md)") == "tables-15-here"


def test_a_missing_file_or_anchor_is_reported(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n\n## Two words\n\n## Two words\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md#two-words-1) [gone](c.md) [bad](b.md#three) `[code](nowhere.md)` [web](https://x.org)\n"
        "```\n[fenced](nowhere.md)\n```\n[self](#nothing)\n"
    )
    assert broken_links(page, tmp_path) == ["a.md:1: c.md", "a.md:1: b.md#three", "a.md:5: #nothing"]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(document):
    assert broken_links(document) == []
