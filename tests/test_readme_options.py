"""The generated options reference documents every option of the ``faithtests`` group of ``pytest --help``.

The options come from the real parser (``pytest --help`` in a subprocess started outside the repo, so
only the installed plugin speaks), not from a list kept here; the reference is what the docs site shows
(:func:`faithtests.plugin.option_docs.options_markdown`, rendered into ``docs/options.md`` by the site's
hook). An option registered anywhere (the plugin or a protocol's manifest) without its row, its ini key
or its default fails here; so does a row for an option pytest does not have, and a docs page that lost
the marker the hook replaces.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from faithtests.plugin.option_docs import options_markdown
from faithtests.plugin.option_table import data_names

ROOT = Path(__file__).resolve().parents[1]
OPTIONS_PAGE = ROOT / "docs" / "options.md"
NO_INI = "—"
_GROUP = re.compile(r"^faithtests\b.*:$")
_FLAG = re.compile(r"^ {2}(?:-\w, )?(--faith-[a-z0-9-]+)(=\S+|\s\[\S+\])?")
_INI = re.compile(r"^ {2}(faith_\w+) \(\w+\):", re.MULTILINE)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class Row:
    option: str
    ini: str
    default: str


def help_options(help_text: str) -> tuple[dict[str, bool], list[str]]:
    """(``--faith-*`` flag -> whether it takes a value, of the faithtests group; the ``faith_*`` ini
    names) of a help text."""
    lines = help_text.splitlines()
    start = next((i for i, line in enumerate(lines) if _GROUP.match(line)), None)
    if start is None:
        raise ValueError("pytest --help has no faithtests option group (is the plugin installed?)")
    flags: dict[str, bool] = {}
    for line in lines[start + 1:]:
        if line.strip() and not line[0].isspace():  # the next group's header
            break
        if m := _FLAG.match(line):
            flags[m.group(1)] = m.group(2) is not None
    if not flags:
        raise ValueError("the faithtests option group of pytest --help lists no --faith-* option")
    return flags, _INI.findall(help_text)


def reference_rows(markdown: str) -> list[Row]:
    """The rows of every option table (header ``| option | ini | default | ... |``) of the reference."""
    rows = []
    for line in markdown.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in _CELL_SPLIT.split(line)[1:-1]]
        if len(cells) < 3 or cells[0] == "option":
            continue
        rows.append(Row(cells[0], cells[1].strip("`"), cells[2]))
    return rows


def undocumented(help_text: str, markdown: str) -> list[str]:
    """What the reference lacks or gets wrong against the help text: one line per problem."""
    flags, inis = help_options(help_text)
    rows = reference_rows(markdown)
    by_flag = {flag: row for row in rows for flag in re.findall(r"--faith-[a-z0-9-]+", row.option)}
    by_ini = {row.ini: row for row in rows if row.ini != NO_INI}
    problems = []
    for flag, takes_value in flags.items():
        ini = flag.removeprefix("--").replace("-", "_")
        expected = ini if ini in inis else NO_INI
        row = by_flag.get(flag)
        if row is None:
            problems.append(f"{flag}: not in the options reference")
            continue
        if row.ini != expected:
            problems.append(f"{flag}: the ini column says {row.ini!r}, pytest --help has {expected!r}")
        if not row.default:
            problems.append(f"{flag}: no default in the options reference")
        elif not takes_value and row.default != "off":
            problems.append(f"{flag}: a flag without a value, but its default is {row.default!r}, not 'off'")
    flag_inis = {f.removeprefix("--").replace("-", "_") for f in flags}
    for ini in inis:
        if ini in flag_inis:
            continue
        row = by_ini.get(ini)
        if row is None:
            problems.append(f"ini {ini}: not in the options reference")
        elif not row.default:
            problems.append(f"ini {ini}: no default in the options reference")
    problems += [f"{flag}: in the options reference but not in pytest --help"
                 for flag in sorted(set(by_flag) - set(flags))]
    return problems


def pytest_help(cwd: Path) -> str:
    """``pytest --help`` as a user sees it (no repo conftest or ini: run from ``cwd``)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    env["COLUMNS"] = "100"
    out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def docs_hooks() -> ModuleType:
    """``docs/hooks.py``, the site's MkDocs hooks (a file, not a package module)."""
    spec = importlib.util.spec_from_file_location("faithtests_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_faith_option_is_in_the_reference_with_its_ini_and_default(tmp_path: Path) -> None:
    help_text = pytest_help(tmp_path)
    flags, inis = help_options(help_text)
    assert {"--faith-model", "--faith-data", "--faith-allow-missing", "--faith-sage"} <= set(flags)
    assert {"faith_max_exemplars", "faith_default_thresholds"} <= set(inis)
    assert undocumented(help_text, options_markdown()) == []


def test_the_options_page_is_rendered_from_the_declared_options() -> None:
    hooks = docs_hooks()
    page = OPTIONS_PAGE.read_text(encoding="utf-8")
    assert page.count(hooks.OPTIONS_MARKER) == 1, "docs/options.md lost the marker the hook replaces"
    rendered = hooks.render_markers(page)
    assert hooks.OPTIONS_MARKER not in rendered
    assert options_markdown() in rendered
    assert any("--faith-report" in row.option for row in reference_rows(rendered))


def test_the_data_sets_page_lists_every_data_name_from_the_manifests() -> None:
    """The ``--faith-data`` table is generated from the same table the plugin checks paths against."""
    hooks = docs_hooks()
    page = (ROOT / "docs" / "data-sets.md").read_text(encoding="utf-8")
    assert page.count(hooks.DATA_MARKER) == 1, "docs/data-sets.md lost the marker the hook replaces"
    rendered = hooks.render_markers(page)
    names = set(re.findall(r"^\| `(\w+)` \|", rendered, re.MULTILINE))
    assert names == set(data_names()) and {"coco", "sugarcrepe", "imavb", "spdfaith"} <= names


FAKE_HELP = """\
general:
  -k EXPRESSION         only run tests matching the expression

faithtests: behavioural suites for vision-language models:
  --faith-report=DIR    scorecard directory (default: faith-report/) (ini:
                        faith_report)
  --faith-shiny=X       a new option nobody documented; it mentions
                        --faith-report in its help (ini: faith_shiny)
  --faith-device=DEVICE
                        device for the models
  --faith-ray=[ADDRESS]
                        a pool of Ray actors
  --faith-quiet         a flag (ini: faith_quiet)

distributed and subprocess testing:
  -n numprocesses, --numprocesses=numprocesses

[pytest] ini-options in the first pytest.ini|tox.ini|setup.cfg|pyproject.toml file found:
  faith_report (string):
                        scorecard directory
  faith_shiny (string): a new option
  faith_quiet (bool):   a flag
  faith_max_exemplars (string):
                        failure exemplars kept per test
"""

FAKE_REFERENCE = """\
### Report

| option | ini | default | help |
|---|---|---|---|
| `--faith-report` `DIR` | `faith_report` | `faith-report` | where the scorecard goes |
| `--faith-device` `DEVICE` | `faith_device` | `auto` | `cpu`, `cuda`; `auto\\|cuda` |
| `--faith-ray` `ADDRESS` | `faith_ray` | — | Ray |
| `--faith-quiet` | `faith_quiet` | `1` | a flag |
| `--faith-gone` `N` | — | `3` | an option that was removed |
| — | `faith_max_exemplars` |  | exemplars |
"""


def test_an_undocumented_option_fails_the_check() -> None:
    assert undocumented(FAKE_HELP, FAKE_REFERENCE) == [
        "--faith-shiny: not in the options reference",
        "--faith-device: the ini column says 'faith_device', pytest --help has '—'",
        "--faith-ray: the ini column says 'faith_ray', pytest --help has '—'",
        "--faith-quiet: a flag without a value, but its default is '`1`', not 'off'",
        "ini faith_max_exemplars: no default in the options reference",
        "--faith-gone: in the options reference but not in pytest --help",
    ]


def test_a_help_text_without_the_group_is_an_error_not_a_pass() -> None:
    with pytest.raises(ValueError) as err:
        help_options("general:\n  -k EXPRESSION\n")
    assert str(err.value) == "pytest --help has no faithtests option group (is the plugin installed?)"


def test_the_readme_names_every_model_of_the_default_run() -> None:
    """Issue 49, item 6: the README named reference:clip and reference:vlm as the default run's models,
    but reference:omni runs by default too (in the suites whose manifest declares audio)."""
    from faithtests.plugin.model_spec import DEFAULT_OMNI, DEFAULT_SCORER, DEFAULT_VLM
    from faithtests.protocols import manifests

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.partition("## Set-up")[2].partition("```")[0]
    assert all(f"`{m}`" in setup for m in (DEFAULT_SCORER, DEFAULT_VLM, DEFAULT_OMNI)), setup
    audio = [s for m in manifests() if m.audio for s in m.suites]
    assert audio and all(s.replace("_", "-") in setup for s in audio), (audio, setup)
