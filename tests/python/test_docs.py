# SPDX-License-Identifier: MIT
"""The reference pages in doc/ list what the code has."""

from __future__ import annotations

import re
from pathlib import Path

from mdfuser import _C, FusionDefinition

DOC = Path(__file__).resolve().parents[2] / "doc"


def test_every_operation_is_in_the_op_table():
    text = (DOC / "ops.md").read_text()
    documented = {
        word for quoted in re.findall(r"`([a-z_0-9 ]+)`", text) for word in quoted.split()
    }
    ops = FusionDefinition().ops
    public = {name for name in dir(ops) if not name.startswith("_")}
    missing = sorted(public - documented)
    assert not missing, f"doc/ops.md does not list {missing}"


def test_ignored_option_names_are_the_documented_ones():
    text = (DOC / "options.md").read_text()
    section = text.split("## Names accepted and ignored")[1]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    enable = {re.search(r"`([a-z_]+)`", r[0]).group(1) for r in rows if "`" in r[0]}
    disable = {re.search(r"`([a-z_]+)`", r[1]).group(1) for r in rows if "`" in r[1]}
    assert enable == set(_C._ignored_enable_options())
    assert disable == set(_C._ignored_disable_options())


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case,
    punctuation dropped, spaces as hyphens, repeats numbered -1, -2, ..."""
    anchors, seen = set(), {}
    for title in re.findall(r"^#+\s+(.*?)\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_links_to_sections_name_existing_headings():
    root = DOC.parent
    pages = [root / "README.md", root / "benchmarks" / "README.md", *sorted(DOC.glob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            linked = (page.parent / target) if target else page
            if not linked.is_file() or anchor not in heading_anchors(linked.read_text()):
                broken.append(f"{page.relative_to(root)}: {target}#{anchor}")
    assert not broken, broken
