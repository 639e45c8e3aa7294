"""README.md's Options table documents every option of the ``faithtests`` group of ``pytest --help``.

The options come from the real parser (``pytest --help`` in a subprocess started outside the repo, so
only the installed plugin speaks), not from a list kept here: an option added anywhere in the plugin
or a protocol's fixtures fails this test until its row, with its ini name and its default, is written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
NO_INI = "—"
_GROUP = re.compile(r"^faithtests\b.*:$")
_FLAG = re.compile(r"^ {2}(?:-\w, )?(--faith-[a-z0-9-]+)")
_INI = re.compile(r"^ {2}(faith_\w+) \(\w+\):", re.MULTILINE)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class Row:
    option: str
    ini: str
    default: str


def help_options(help_text: str) -> tuple[list[str], list[str]]:
    """(the ``--faith-*`` flags of the faithtests group, the ``faith_*`` ini names) of a help text."""
    lines = help_text.splitlines()
    start = next((i for i, line in enumerate(lines) if _GROUP.match(line)), None)
    if start is None:
        raise ValueError("pytest --help has no faithtests option group (is the plugin installed?)")
    flags: list[str] = []
    for line in lines[start + 1:]:
        if line.strip() and not line[0].isspace():  # the next group's header
            break
        if m := _FLAG.match(line):
            flags.append(m.group(1))
    if not flags:
        raise ValueError("the faithtests option group of pytest --help lists no --faith-* option")
    return flags, _INI.findall(help_text)


def options_table(readme: str) -> list[Row]:
    """The rows of the table under README.md's ``## Options`` heading (up to the next heading)."""
    parts = re.split(r"^## Options\n", readme, maxsplit=1, flags=re.MULTILINE)
    if len(parts) < 2:
        raise ValueError("README.md has no '## Options' section")
    section = re.split(r"^#{2,3} ", parts[1], maxsplit=1, flags=re.MULTILINE)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in _CELL_SPLIT.split(line)[1:-1]]
        if len(cells) < 3 or cells[0] == "option":
            continue
        rows.append(Row(cells[0], cells[1].strip("`"), cells[2]))
    return rows


def undocumented(help_text: str, readme: str) -> list[str]:
    """What the Options table lacks or gets wrong against the help text: one line per problem."""
    flags, inis = help_options(help_text)
    rows = options_table(readme)
    by_flag = {flag: row for row in rows for flag in re.findall(r"--faith-[a-z0-9-]+", row.option)}
    by_ini = {row.ini: row for row in rows if row.ini != NO_INI}
    problems = []
    for flag in flags:
        ini = flag.removeprefix("--").replace("-", "_")
        expected = ini if ini in inis else NO_INI
        row = by_flag.get(flag)
        if row is None:
            problems.append(f"{flag}: not in README.md's Options table")
            continue
        if row.ini != expected:
            problems.append(f"{flag}: the ini column says {row.ini!r}, pytest --help has {expected!r}")
        if row.default in ("", NO_INI):
            problems.append(f"{flag}: no default in README.md's Options table")
    flag_inis = {f.removeprefix("--").replace("-", "_") for f in flags}
    for ini in inis:
        if ini in flag_inis:
            continue
        row = by_ini.get(ini)
        if row is None:
            problems.append(f"ini {ini}: not in README.md's Options table")
        elif row.default in ("", NO_INI):
            problems.append(f"ini {ini}: no default in README.md's Options table")
    problems += [f"{flag}: in README.md's Options table but not in pytest --help"
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


def test_every_faith_option_is_documented_with_its_ini_and_default(tmp_path: Path) -> None:
    help_text = pytest_help(tmp_path)
    flags, inis = help_options(help_text)
    assert {"--faith-model", "--faith-data", "--faith-allow-missing", "--faith-sage"} <= set(flags)
    assert {"faith_max_exemplars", "faith_default_thresholds"} <= set(inis)
    assert undocumented(help_text, README.read_text(encoding="utf-8")) == []


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

distributed and subprocess testing:
  -n numprocesses, --numprocesses=numprocesses

[pytest] ini-options in the first pytest.ini|tox.ini|setup.cfg|pyproject.toml file found:
  faith_report (string):
                        scorecard directory
  faith_shiny (string): a new option
  faith_max_exemplars (string):
                        failure exemplars kept per test
"""

FAKE_README = """\
## Options

| option | ini | default | meaning |
|---|---|---|---|
| `--faith-report DIR` | `faith_report` | `faith-report/` | where the scorecard goes |
| `--faith-device DEV` | `faith_device` | `auto` | `cpu`, `cuda`; `auto\\|cuda` |
| `--faith-gone N` | — | `3` | an option that was removed |
| — | `faith_max_exemplars` |  | exemplars |

### Threads
| `--faith-shiny X` | `faith_shiny` | `1` | outside the Options table: does not count |
"""


def test_an_undocumented_option_fails_the_check() -> None:
    assert undocumented(FAKE_HELP, FAKE_README) == [
        "--faith-shiny: not in README.md's Options table",
        "--faith-device: the ini column says 'faith_device', pytest --help has '—'",
        "ini faith_max_exemplars: no default in README.md's Options table",
        "--faith-gone: in README.md's Options table but not in pytest --help",
    ]


def test_a_help_text_without_the_group_is_an_error_not_a_pass() -> None:
    with pytest.raises(ValueError) as err:
        help_options("general:\n  -k EXPRESSION\n")
    assert str(err.value) == "pytest --help has no faithtests option group (is the plugin installed?)"
