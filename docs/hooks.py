"""MkDocs hooks of the docs site (``hooks:`` in ``mkdocs.yml``): pages kept elsewhere, generated text.

- Each protocol's ``faithtests/protocols/<name>/README.md`` is the site's page ``protocols/<name>.md``
  (its nav entry made from its manifest: :func:`protocol_nav`) and
  ``fixtures/README.md`` (the model cards) is ``reference-models.md``: added as generated files, so there
  is one copy of each, kept beside the code it describes.
- The marker ``<!-- faith:options -->`` becomes the options reference, generated from the declared
  options (:func:`faithtests.plugin.option_docs.options_markdown`), so no hand-kept table can drift;
  ``<!-- faith:data -->`` becomes the ``--faith-data`` names' table, collected from the protocols'
  manifests (:func:`data_markdown`).
- The READMEs are written for GitHub's Markdown, which starts a list or a table right after a paragraph
  line; Python-Markdown needs a blank line there, which :func:`gfm_blocks` inserts (outside code fences).
  GitHub also needs a backslash before a pipe inside a code span of a table cell, which Python-Markdown
  would print (it never splits cells inside code spans): :func:`gfm_blocks` drops it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from faithtests.data.names import SHARED
from faithtests.manifest import data_table, number_order
from faithtests.plugin.option_docs import options_markdown
from faithtests.protocols import manifests

ROOT = Path(__file__).resolve().parents[1]
OPTIONS_MARKER = "<!-- faith:options -->"
DATA_MARKER = "<!-- faith:data -->"
_KIND = {"dir": "a folder", "file": "a file", "any": "a file or a folder"}
_BLOCK_START = re.compile(r"^(?:[-*+] |\d+\. |\||```)")
_CODE_SPAN = re.compile(r"`[^`]*`")


def readme_pages() -> dict[str, Path]:
    """Site path -> the README that is that page: one per protocol, and the reference models' cards."""
    pages = {f"protocols/{p.parent.name}.md": p
             for p in sorted((ROOT / "faithtests" / "protocols").glob("*/README.md"))}
    pages["reference-models.md"] = ROOT / "fixtures" / "README.md"
    return pages


def gfm_blocks(markdown: str) -> str:
    """``markdown`` with a blank line before each list, table or code fence that follows a paragraph
    line directly (GitHub renders those; Python-Markdown would fold them into the paragraph)."""
    out: list[str] = []
    fence = False
    for line in markdown.split("\n"):
        starts_block = bool(_BLOCK_START.match(line))
        prev = out[-1] if out else ""
        prev_plain = bool(prev.strip()) and not _BLOCK_START.match(prev) and not prev.startswith(("#", " "))
        if not fence and starts_block and prev_plain:
            out.append("")
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("|"):
            line = _CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)
        out.append(line)
    return "\n".join(out)


def data_markdown() -> str:
    """The ``--faith-data`` names as a Markdown table: what the path must be and which suites read it
    (the table the plugin checks ``--faith-data`` against)."""
    rows = ["| name | path | what it holds | needs | read by |", "|---|---|---|---|---|"]
    for name, spec in data_table(manifests(), SHARED).items():
        needs = f"`{spec.needs[0]}`: {spec.needs[1]}" if spec.needs else "—"
        suites = ", ".join(f"`{s}`" for s in spec.suites) or "—"
        rows.append(f"| `{name}` | {_KIND[spec.kind]} | {spec.what} | {needs} | {suites} |")
    return "\n".join(rows) + "\n"


def render_markers(markdown: str) -> str:
    """``markdown`` with every generated-content marker replaced by its content."""
    if OPTIONS_MARKER in markdown:
        markdown = markdown.replace(OPTIONS_MARKER, options_markdown())
    if DATA_MARKER in markdown:
        markdown = markdown.replace(DATA_MARKER, data_markdown())
    return markdown


def protocol_nav() -> list[dict[str, str]]:
    """The nav entries of the protocol pages, from the manifests: ``TITLE (suites 1, 2a)``, in the order
    of each protocol's first suite number (a bundled protocol's page joins the nav with no edit here)."""
    entries = []
    for m in manifests():
        numbers = sorted((n for n, _ in m.questions.values()), key=number_order)  # "2a" before "10"
        label = f"{m.title} (suite{'s' if len(numbers) > 1 else ''} {', '.join(numbers)})"
        page = {label: f"protocols/{m.name}.md"}
        entries.append((number_order(numbers[0] if numbers else ""), m.name, page))
    return [entry for *_, entry in sorted(entries, key=lambda e: (e[0], e[1]))]


def on_config(config: Any) -> Any:
    """The ``Protocols`` section of the nav: its hand-written pages, then :func:`protocol_nav`."""
    for section in config["nav"]:
        if isinstance(section, dict) and "Protocols" in section:
            section["Protocols"] = [*section["Protocols"], *protocol_nav()]
    return config


def on_files(files: Files, config: Any) -> Files:
    for uri, path in readme_pages().items():
        files.append(File.generated(config, uri, content=path.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return gfm_blocks(render_markers(markdown))
