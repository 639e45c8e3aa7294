"""``faithtests list [suites|metrics|models|data] [--json]``: what this installation can run, by name.

Every section is read from where the name is declared, never from a copy: suites from the protocol
manifests (bundled and registered), metrics from their glossaries, models from the bundled reference
checkpoints (``fixtures/``, or ``$FAITHTESTS_FIXTURES``) and the spec prefixes (built in, and those
registered in the ``faithtests.models`` entry-point group), data names from the manifests' data table.
Nothing heavy is imported: no torch, no checkpoint is opened beyond its ``config.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from faithtests.data.names import SHARED
from faithtests.manifest import Manifest, data_table, glossary_terms, number_order
from faithtests.models.checks import known_prefixes
from faithtests.models.locations import fixtures_root
from faithtests.models.plugins import PY_PREFIX, plugin_prefixes
from faithtests.protocols import manifests
from faithtests.scorecard.glossary import GlossaryError

SECTIONS = ("suites", "metrics", "models", "data")
#: What each built-in spec prefix loads (faithtests.models.registry's module doc, in one line each).
BUILTIN_PREFIXES = {
    "reference:": "reference:NAME, a bundled reference checkpoint (fixtures/ or $FAITHTESTS_FIXTURES)",
    "open_clip:": "open_clip:NAME@PRETRAINED, open_clip:CONFIG.json@WEIGHTS or open_clip:local-dir:PATH",
    "hf:": "hf:PATH_OR_REPO, a Hugging Face dual encoder or image-text-to-text model (local or cached)",
    "vlm-scorer:": "vlm-scorer:SPEC, a generative VLM used as an image-text scorer",
    PY_PREFIX: "py:package.module:factory, a model from any importable module",
}

Entry = dict[str, Any]  # {"name", "description", ...section-specific fields}


def suites(found: Sequence[Manifest]) -> list[Entry]:
    """Each suite once, with the protocols that record under it (two may share one: a second protocol's
    probes of the same question), in manifest order."""
    owners: dict[str, list[Manifest]] = {}
    for m in found:
        for s in m.suites:
            owners.setdefault(s, []).append(m)
    return [{"name": s, "description": "; ".join(_protocol(m) for m in ms), "protocols": [m.name for m in ms]}
            for s, ms in owners.items()]


def _protocol(m: Manifest) -> str:
    """``TITLE: PAPER``, or the paper alone when its title already starts it."""
    return m.paper if m.paper.startswith(m.title) else f"{m.title}: {m.paper}"


def metrics(found: Sequence[Manifest]) -> list[Entry]:
    terms = glossary_terms(found)
    return [{"name": n, "description": terms[n].sentence, "direction": terms[n].direction,
             "unit": terms[n].unit, "source": terms[n].source()}
            for n in sorted(terms, key=lambda n: (n.lower(), n))]


def _reference(folder: Path) -> str | None:
    """What a fixtures folder holds, as the registry dispatches on it; None when it is no checkpoint."""
    if (folder / "open_clip_config.json").is_file():
        return "open_clip image-text scorer"
    if not (folder / "config.json").is_file():
        return None
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        training = json.loads((folder / "training.json").read_text(encoding="utf-8")) \
            if (folder / "training.json").is_file() else {}
    except (OSError, ValueError):  # a damaged card is still a folder the registry will try
        return "Hugging Face model"
    kind = f"Hugging Face {config.get('model_type', 'model')} model" if isinstance(config, dict) else ""
    policy = training.get("policy") if isinstance(training, dict) else None
    return kind + (f", {policy} answer policy" if isinstance(policy, str) else "")


def models() -> list[Entry]:
    """``reference:NAME`` of each bundled checkpoint, then every spec prefix a ``--faith-model`` /
    ``--faith-vlm`` may start with."""
    root = fixtures_root()
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    out: list[Entry] = []
    for folder in folders:
        what = _reference(folder)
        if what is not None:
            out.append({"name": f"reference:{folder.name}", "description": what, "kind": "reference",
                        "path": str(folder)})
    registered = plugin_prefixes()
    for prefix in known_prefixes():
        ep = registered.get(prefix.removesuffix(":"))
        what = BUILTIN_PREFIXES.get(prefix) or (f"registered by {ep.value}" if ep is not None else "")
        out.append({"name": prefix, "description": what, "kind": "prefix"})
    return out


def data(found: Sequence[Manifest]) -> list[Entry]:
    return [{"name": n, "description": f"{spec.what} (suites: {', '.join(spec.suites) or 'none'})",
             "kind": spec.kind, "suites": list(spec.suites)}
            for n, spec in sorted(data_table(found, SHARED).items())]


# -- the suites tables of the README and the docs, generated from the manifests' questions -------------
#: file (relative to the checkout) -> how a protocol's page is linked from it
DOC_TABLES: dict[str, Callable[[Manifest], str]] = {
    "README.md": lambda m: f"faithtests/protocols/{m.name}/README.md",
    "docs/index.md": lambda m: f"protocols/{m.name}.md",
    "docs/suites.md": lambda m: f"protocols/{m.name}.md",
}
_START, _END = "<!-- suites table: generated from the protocol manifests", "<!-- end of suites table -->"
WRITE_COMMAND = "python -m faithtests.catalog --write-docs"


def _asked(found: Sequence[Manifest]) -> list[tuple[str, str, Manifest, str]]:
    """(number, suite, protocol, question) of every suite question the manifests declare, in number
    order; a suite a manifest runs without a question is an error (its row would be missing)."""
    rows = []
    for m in found:
        for suite in m.suites:
            if suite not in m.questions:
                raise ValueError(f"protocol {m.name!r} runs suite {suite!r} but its manifest declares no "
                                 "question for it (Manifest.questions)")
            number, question = m.questions[suite]
            rows.append((number, suite, m, question))
    return sorted(rows, key=lambda r: (number_order(r[0]), r[1]))


def suites_table(found: Sequence[Manifest], file: str) -> str:
    """The Markdown suites table of ``file`` (a key of :data:`DOC_TABLES`): one row per suite with its
    protocols' questions and links, or (docs/suites.md) one row per numbered question with its file."""
    link = DOC_TABLES[file]
    rows = _asked(found)
    if file == "docs/suites.md":
        lines = ["| suite | file | protocol | question it asks |", "|---|---|---|---|"]
        lines += [f"| {n} `{s}` | `suites/test_{s}.py` | [{m.title}]({link(m)}) | {q} |"
                  for n, s, m, q in rows]
        return "\n".join(lines)
    by_suite: dict[str, list[tuple[Manifest, str]]] = {}
    for _, suite, m, question in rows:
        by_suite.setdefault(suite, []).append((m, question))
    lines = ["| suite | question it asks | paper |", "|---|---|---|"]
    for suite, asked in by_suite.items():
        papers = ", ".join(f"[{m.title}]({link(m)})" for m, _ in asked)
        lines.append(f"| `{suite}` | {' '.join(q for _, q in asked)} | {papers} |")
    return "\n".join(lines)


def _spliced(text: str, table: str, file: str) -> str:
    start = text.find(_START)
    end = text.find(_END, start)
    if start < 0 or end < 0:
        raise ValueError(f"{file}: no '{_START} ...' / '{_END}' markers around its suites table")
    head = text.index("\n", start) + 1  # the start marker's line (it says how to regenerate) is kept
    return text[:head] + table + "\n" + text[end:]


def doc_tables(root: Path, found: Sequence[Manifest]) -> dict[str, tuple[str, str]]:
    """file -> (its text now, its text with the generated suites table)."""
    out = {}
    for file in DOC_TABLES:
        text = (root / file).read_text(encoding="utf-8")
        out[file] = (text, _spliced(text, suites_table(found, file), file))
    return out


def write_docs(root: Path) -> list[str]:
    """Regenerate the suites tables under ``root``; the files that changed."""
    changed = []
    for file, (now, want) in doc_tables(root, manifests()).items():
        if now != want:
            (root / file).write_text(want, encoding="utf-8")
            changed.append(file)
    return changed


def catalog(sections: Sequence[str]) -> dict[str, list[Entry]]:
    found = manifests()
    makers: dict[str, Callable[[], list[Entry]]] = {
        "suites": lambda: suites(found), "metrics": lambda: metrics(found), "models": models,
        "data": lambda: data(found)}
    return {s: makers[s]() for s in sections}


def format_text(listed: dict[str, list[Entry]]) -> str:
    """A heading per section, then one item per line: its name, padded, and its description."""
    blocks = []
    for section, entries in listed.items():
        width = max((len(e["name"]) for e in entries), default=0)
        lines = [f"{e['name']:<{width}}  {e['description']}".rstrip() for e in entries]
        blocks.append("\n".join([f"{section}:", *(f"  {line}" for line in lines or ["(none)"])]))
    return "\n\n".join(blocks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="faithtests list", description="The suites, metrics, models and "
                                     "data names this installation knows.")
    parser.add_argument("section", nargs="?", choices=SECTIONS, help="one section (default: all four)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--write-docs", action="store_true", help="regenerate the suites tables of the "
                        "README and the docs of this checkout from the manifests, and list what changed")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.write_docs:
        root = Path(__file__).resolve().parents[1]
        print("\n".join(f"rewrote {f}" for f in write_docs(root)) or "suites tables already current")
        return 0
    try:
        listed = catalog([args.section] if args.section else SECTIONS)
    except GlossaryError as exc:  # a registered protocol's glossary that does not load
        print(f"faithtests list: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(listed, indent=1) if args.json else format_text(listed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
