"""The configuration reference, generated from workflow/schemas/config.schema.yaml (the one home of every key, its
type, default and meaning), and the documentation site's front page, taken from README.md.

    python docs/config_reference.py > docs/configuration.md     # `make reference`: the committed page, rewritten

docs/configuration.md is committed, so that its links work in the repository as on the site; tests/test_docs.py
fails when it is not what the schema makes now. `mkdocs build` (mkdocs.yml `hooks:`) runs `on_files`, which adds
`index.md` from README.md (its `docs/` links made site-relative) without writing it into docs/, and
`on_page_markdown`, which points the pages' links to `../README.md` at that page (docs/design.md §19).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
README = REPO / "README.md"
PAGE = "configuration.md"

INTRO = """# Configuration reference

Generated from `workflow/schemas/config.schema.yaml` by `docs/config_reference.py`: the schema is the one home of
every key and default, and validation fills the defaults in before anything runs. Unknown keys are errors (a typo
never silently becomes a default), and the values the code owns (checkpoint formats, architectures, decoder names
and settings, roles) are checked against the code's own tables, with a message that lists them.

A key's path is dotted; `<name>` stands for a name you choose (letters, digits, `.`, `_` and `-`), `[]` for each
item of a list. Required keys are marked **required**.

| key | type | default | allowed | description |
|---|---|---|---|---|
"""


NAME_PATTERN = "^[A-Za-z0-9._-]"  # the start of the schema's name patterns, shown in words


def _text(value) -> str:
    return value if isinstance(value, str) and value else json.dumps(value, ensure_ascii=False)


def _type(node: dict) -> str:
    kind = node.get("type", "")
    return " or ".join(kind) if isinstance(kind, list) else kind


def _allowed(node: dict) -> str:
    parts = []
    if "enum" in node:
        parts.append(", ".join(f"`{_text(v)}`" for v in node["enum"]))
    for word, key in (("≥", "minimum"), ("≤", "maximum"), (">", "exclusiveMinimum")):
        if key in node:
            parts.append(f"{word} {node[key]}")
    if "multipleOf" in node:
        parts.append(f"multiple of {node['multipleOf']}")
    if "pattern" in node:
        name = node["pattern"].startswith(NAME_PATTERN)
        parts.append("letters, digits, `.`, `_`, `-`" if name else f"pattern `{node['pattern']}`")
    if "minItems" in node:
        parts.append(f"at least {node['minItems']} item(s)")
    if node.get("uniqueItems"):
        parts.append("no repeats")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def keys(node: dict, path: str = "", required: bool = False) -> list[dict]:
    """Every key below `node`, depth first in the schema's order: {path, type, default, allowed, required,
    description}. Objects keyed by a chosen name add `<name>`, lists of objects `[]`."""
    out = []
    if path:
        default = node.get("default")
        out.append({
            "path": path, "type": _type(node), "allowed": _allowed(node), "required": required,
            "default": "" if "default" not in node or default in ({}, []) else f"`{_text(default)}`",
            "description": _cell(node.get("description", "")),
        })
    prefix = f"{path}." if path else ""
    for name, child in node.get("properties", {}).items():
        out += keys(child, prefix + name, name in node.get("required", []))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        label = "<name>" if "propertyNames" in node else "<setting>"
        out += keys(extra, prefix + label) if extra.get("properties") or extra.get("description") else [
            {"path": prefix + label, "type": _type(extra), "allowed": _allowed(extra), "required": False,
             "default": "", "description": ""}]
    items = node.get("items")
    if isinstance(items, dict) and items.get("properties"):
        for name, child in items["properties"].items():
            out += keys(child, f"{path}[].{name}", name in items.get("required", []))
    return out


def reference(schema_path: Path = SCHEMA) -> str:
    """The reference page's Markdown."""
    schema = yaml.safe_load(schema_path.read_text(encoding="utf-8"))
    rows = []
    for key in keys(schema):
        description = ("**required.** " if key["required"] else "") + key["description"]
        rows.append(f"| `{key['path']}` | {key['type']} | {key['default']} | {_cell(key['allowed'])} | "
                    f"{description} |")
    return INTRO + "\n".join(rows) + "\n"


def front_page(readme: str) -> str:
    """README.md as the site's index: links into docs/ become site-relative, other repository paths stay text."""
    return re.sub(r"\]\(docs/", "](", readme)


def site_links(markdown: str) -> str:
    """A docs page's Markdown as the site reads it: its links to the repository's README (`../README.md`, which
    the site serves as its front page) point at `index.md`."""
    return re.sub(r"\]\(\.\./README\.md(?=[#)])", "](index.md", markdown)


def on_files(files, config):
    """mkdocs hook: add the README's front page to the site's files."""
    from mkdocs.structure.files import File  # noqa: PLC0415 - only a docs build has mkdocs

    files.append(File.generated(config, "index.md", content=front_page(README.read_text(encoding="utf-8"))))
    return files


def on_page_markdown(markdown, page, config, files):
    """mkdocs hook: a page's links to the README lead to the site's front page."""
    return site_links(markdown)


if __name__ == "__main__":
    print(reference(), end="")
