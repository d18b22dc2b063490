"""Every link of README.md and docs/*.md reaches a file of the source tree, and every `#anchor` a heading of the page
it names, as a reader of the repository (not of the built site) follows them.

The anchor of a heading is Python-Markdown's toc slug, written here from its documented rule: the heading's text
without its markup, folded to ASCII, characters other than word characters, spaces and hyphens dropped, lowercased,
runs of spaces and hyphens made one hyphen. A link into another site (`https:`, `mailto:`) is not followed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sources import REPO

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def slug(heading: str) -> str:
    """The toc anchor of a Markdown heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[`*]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def prose(text: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """(line number, line) of a Markdown text outside fenced code blocks, inline code spans blanked (kept with
    `code_spans`)."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line if code_spans else re.sub(r"`[^`]*`", "``", line)))
    return out


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page: its headings' slugs and explicit `{#id}` attributes."""
    found = set()
    for _, line in prose(page.read_text(encoding="utf-8"), code_spans=True):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*(\{#([\w-]+)\})?\s*$", line)
        if heading:
            found.add(heading.group(3) or slug(heading.group(1)))
    return found


def page_links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image of `page` outside code (a link's text may run over
    lines: the number is the line of its target)."""
    lines = prose(page.read_text(encoding="utf-8"))
    text = "\n".join(line for _, line in lines)
    return [(lines[text.count("\n", 0, m.start(1))][0], m.group(1)) for m in LINK.finditer(text)]


def broken_links(page: Path) -> list[str]:
    """One line per link of `page` whose file or anchor is missing in the source tree."""
    broken = []
    for number, target in page_links(page):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc:
            continue
        where = f"{page.relative_to(REPO)}:{number}: {target}"
        file = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not file.exists():
            broken.append(f"{where}: no file {file.relative_to(REPO) if file.is_relative_to(REPO) else file}")
        elif parts.fragment and file.suffix == ".md" and parts.fragment not in anchors(file):
            broken.append(f"{where}: no heading #{parts.fragment} in {file.relative_to(REPO)}")
    return broken


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").glob("*.md"))]


def test_the_slug_is_the_toc_rule():
    assert slug("Sizes and disk") == "sizes-and-disk"
    assert slug("The `released` form: DINOv2's registers") == "the-released-form-dinov2s-registers"
    assert slug("Beside the [published](x.md) tables") == "beside-the-published-tables"
    assert slug("Devices, precision and clusters — SLURM") == "devices-precision-and-clusters-slurm"


def test_a_missing_page_and_a_missing_anchor_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Sizes and disk\n\n## The `form` key\n\n```\n[not a link](gone.md)\n```\n[two\nlines](gone.md)\n")
    page = tmp_path / "docs" / "b.md"
    page.write_text("[ok](a.md#sizes-and-disk) [code](a.md#the-form-key) [gone](gone.md) [anchor](a.md#sizes) `[code](x.md)` "
                    "[self](#here)\n\n## Here\n[web](https://example.org/x.md)\n")
    assert broken_links(page) == ["docs/b.md:1: gone.md: no file docs/gone.md",
                                  "docs/b.md:1: a.md#sizes: no heading #sizes in docs/a.md"]
    assert broken_links(tmp_path / "docs" / "a.md") == ["docs/a.md:11: gone.md: no file docs/gone.md"]


def test_every_link_of_the_readme_and_the_docs_reaches_a_file_and_heading_of_the_source_tree():
    found = [line for page in pages() for line in broken_links(page)]
    assert len(pages()) >= 15
    assert not found, f"{len(found)} broken link(s):\n" + "\n".join(found)
