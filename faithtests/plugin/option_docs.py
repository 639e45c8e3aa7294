"""The options reference of the docs, generated from the declared options (no hand-kept table to drift):
the plugin's (:mod:`.option_table`) and every protocol manifest's, as markdown tables grouped by section."""

from __future__ import annotations

from collections.abc import Iterable

from faithtests.config import Option
from faithtests.plugin.option_table import all_options

NONE = "—"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def default_text(o: Option) -> str:
    """What an unset option means, as the reference shows it."""
    if o.doc_default is not None:
        return o.doc_default
    if o.kind == "flag":
        return "off"
    if o.kind == "list":
        return NONE
    if o.default is None or o.default == "":
        return NONE
    return f"`{o.default}`"


def _row(o: Option) -> str:
    flag = f"`{o.flag}`" + (f" `{o.metavar}`" if o.metavar else "") if o.cli else NONE
    ini = f"`{o.name}`" if o.ini else NONE
    choices = f" (one of {', '.join(o.choices)})" if o.choices else ""
    return f"| {flag} | {ini} | {default_text(o)} | {_cell(o.help.replace('%%', '%'))}{choices} |"


def options_markdown(options: Iterable[Option] | None = None) -> str:
    """Markdown: one ``###`` section per option section (in declaration order), each a table of flag,
    ini key, default and help."""
    sections: dict[str, list[Option]] = {}
    for o in all_options() if options is None else options:
        sections.setdefault(o.section, []).append(o)
    out: list[str] = []
    for section, opts in sections.items():
        out += [f"### {section[:1].upper()}{section[1:]}", "", "| option | ini | default | help |",
                "|---|---|---|---|", *(_row(o) for o in opts), ""]
    return "\n".join(out)
