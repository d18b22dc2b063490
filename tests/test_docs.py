"""The documentation site (`make docs`, mkdocs.yml): it builds with --strict, its configuration reference holds
every key of the schema, no page holds a hand-written copy of that reference, no internal link is broken, and three
pages render in headless Chromium."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
import yaml
from PIL import Image

from browser import chromium, open_page
from sources import REPO

SPEC = importlib.util.spec_from_file_location("config_reference", REPO / "docs" / "config_reference.py")
config_reference = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(config_reference)

HAVE_MKDOCS = all(importlib.util.find_spec(m) is not None for m in ("mkdocs", "material"))
needs_mkdocs = pytest.mark.skipif(not HAVE_MKDOCS, reason="mkdocs and mkdocs-material absent (pip install '.[docs]', "
                                  "which make setup does)")
needs_browser = pytest.mark.skipif(chromium() is None, reason="headless Chromium absent (/usr/bin/chromium from "
                                   "Debian's chromium package; .ci/run installs it)")
PAGES = ("index.html", "configuration/index.html", "decoder/index.html")  # the three screenshot pages


def schema_keys(node: dict, path: str = "") -> set[str]:
    """Every key of the schema as a dotted path, read independently of the generator: `<*>` for a chosen name,
    `[]` for a list's items."""
    out = set()
    for name, child in node.get("properties", {}).items():
        out.add(f"{path}{name}")
        out |= schema_keys(child, f"{path}{name}.")
    if isinstance(node.get("additionalProperties"), dict):
        out |= schema_keys(node["additionalProperties"], f"{path}<*>.")
    if isinstance(node.get("items"), dict):
        out |= schema_keys(node["items"], f"{path[:-1]}[].")
    return out


def test_every_key_of_the_schema_is_a_row_of_the_reference():
    page = config_reference.reference()
    rows = {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", page, re.M)}
    rows = {re.sub(r"<(name|setting)>", "<*>", row) for row in rows}
    keys = schema_keys(yaml.safe_load(config_reference.SCHEMA.read_text()))
    assert len(keys) > 60
    assert keys - rows == set()


def test_a_key_without_a_default_or_description_still_gets_its_row(tmp_path):
    schema = tmp_path / "schema.yaml"
    schema.write_text("properties:\n  a:\n    type: object\n    required: [b]\n    properties:\n"
                      "      b: {type: integer, minimum: 1, default: 3, description: 'x | y'}\n      c: {enum: [p, q]}\n")
    page = config_reference.reference(schema)
    assert "| `a.b` | integer | `3` | ≥ 1 | **required.** x \\| y |" in page
    assert "| `a.c` |  |  | `p`, `q` |  |" in page


def test_the_committed_configuration_reference_is_what_the_schema_makes_now():
    committed = (REPO / "docs" / config_reference.PAGE).read_text(encoding="utf-8")
    assert committed == config_reference.reference(), "docs/configuration.md is stale: run `make reference`"


def test_the_pages_links_to_the_readme_lead_to_the_site_s_front_page():
    page = "[front page](../README.md) and [its demo](../README.md#two-commands); [README.md](../README.mdx)"
    assert config_reference.site_links(page) == ("[front page](index.md) and [its demo](index.md#two-commands); "
                                                 "[README.md](../README.mdx)")


def key_table_rows(text: str, names: set[str]) -> list[list[str]]:
    """Per Markdown table of `text`, the rows whose first cell is code naming one of `names`; only tables with two
    or more such rows (a copy of the reference, not one table that happens to share a word with a key)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            first = re.match(r"^\|\s*`([^`]+)`", line)
            if first and any(part.strip() in names for part in first.group(1).split(",")):
                current.append(line)
        elif current or line == "":
            tables.append(current)
            current = []
    return [rows for rows in tables if len(rows) >= 2]


def test_the_key_table_finder_flags_a_copy_and_passes_a_stray_word():
    names = {"shard_size", "bootstrap"}
    copy = "| key | what |\n|---|---|\n| `shard_size` | images per shard |\n| `bootstrap` | the intervals |\n"
    assert key_table_rows(copy, names) == [["| `shard_size` | images per shard |", "| `bootstrap` | the intervals |"]]
    assert key_table_rows("| `bootstrap` | a table's stem |\n| `sweep` | another |\n", names) == []


def test_no_page_holds_a_hand_written_copy_of_the_reference():
    keys = schema_keys(yaml.safe_load(config_reference.SCHEMA.read_text()))
    names = {k.rsplit(".", 1)[-1] for k in keys} | {k.replace("<*>", "<name>") for k in keys}
    assert {"shard_size", "resamples", "bootstrap", "features.shard_size"} <= names
    pages = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != config_reference.PAGE)]
    found = [f"{page.name}: {rows}" for page in pages
             for rows in key_table_rows(page.read_text(encoding="utf-8"), names)]
    assert not found, "a table copies config keys (link to docs/configuration.md instead):\n" + "\n".join(found)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.targets += [value for name, value in attrs if name in ("href", "src") and value]


def local_target(site: Path, page: Path, link: str) -> Path | None:
    """The file a site-internal link of `page` points at (a folder: its index.html; `/...` from the site's root),
    or None for another site."""
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    base = site if parts.path.startswith("/") else page.parent
    target = (base / unquote(parts.path).lstrip("/")).resolve()
    return target / "index.html" if link.split("#")[0].endswith("/") or target.is_dir() else target


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if not HAVE_MKDOCS:
        pytest.skip("mkdocs and mkdocs-material absent (pip install '.[docs]', which make setup does)")
    out = tmp_path_factory.mktemp("site")
    # not --quiet: it hides the warnings that --strict turns into a failure (a broken anchor built "cleanly")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(REPO / "mkdocs.yml"), "--site-dir", str(out)], capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@needs_mkdocs
def test_the_site_builds_strictly_with_every_page_of_the_nav(site):
    for page in PAGES:
        assert (site / page).is_file(), page
    assert "shard_size" in (site / "configuration" / "index.html").read_text()


@needs_mkdocs
def test_no_internal_link_of_the_site_is_broken(site):
    broken = []
    pages = sorted(p for p in site.rglob("*.html") if "assets" not in p.parts)
    assert len(pages) >= 15
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.targets:
            target = local_target(site, page, link)
            if target is not None and not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
    assert not broken, "broken links:\n" + "\n".join(broken)


@needs_mkdocs
@needs_browser
def test_three_pages_render_in_headless_chromium_with_their_titles(site, tmp_path):
    for page in PAGES:
        shot = tmp_path / (page.replace("/", "_") + ".png")
        facts = open_page(site / page, shot)
        assert "labelfree-seg-eval" in facts["title"], (page, facts["title"])
        pixels = np.asarray(Image.open(shot).convert("L"))
        assert pixels.std() > 5 and len(np.unique(pixels)) > 20, f"{page}: the screenshot is blank"
        assert all(i["ok"] for i in facts["images"]), (page, [i for i in facts["images"] if not i["ok"]])
        for link in facts["links"]:
            if link.startswith("file://"):
                target = Path(unquote(urlsplit(link).path))
                assert (target / "index.html" if target.is_dir() else target).exists(), (page, link)
