"""The suites tables of the README and the docs are generated from the protocol manifests (issue 48): a
bundled protocol declares its questions once (``Manifest.questions``) and its rows follow; a hand edit
or a stale table fails here with the command that regenerates them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from faithtests.catalog import DOC_TABLES, WRITE_COMMAND, doc_tables, suites_table, write_docs
from faithtests.protocols import manifests

ROOT = Path(__file__).resolve().parents[1]
#: A protocol added after every bundled one (suite number 99 sorts after theirs), so the tests below hold
#: whatever protocols are bundled: a new one is not an edit here (tests/walkthrough/test_add_protocol.py).
SIXTH = replace(manifests()[0], name="winobias", title="WinoBias-V", suites=("bias_swap",),
                questions={"bias_swap": ("99", "does the answer change when only a person's gender does?")})


def test_the_tables_are_what_the_manifests_declare() -> None:
    stale = [file for file, (now, want) in doc_tables(ROOT, manifests()).items() if now != want]
    assert not stale, f"{stale}: suites table(s) not generated from the manifests; run {WRITE_COMMAND}"


def test_every_suite_of_every_manifest_has_a_row() -> None:
    readme = suites_table(manifests(), "README.md")
    for m in manifests():
        for suite in m.suites:
            assert f"| `{suite}` |" in readme
            assert f"[{m.title}](faithtests/protocols/{m.name}/README.md)" in readme


def test_a_sixth_protocol_gets_its_rows_in_every_table(tmp_path: Path) -> None:
    found = [*manifests(), SIXTH]
    assert suites_table(found, "README.md").endswith(
        "| `bias_swap` | does the answer change when only a person's gender does? | "
        "[WinoBias-V](faithtests/protocols/winobias/README.md) |")
    assert suites_table(found, "docs/suites.md").endswith(
        "| 99 `bias_swap` | `suites/test_bias_swap.py` | [WinoBias-V](protocols/winobias.md) | does the "
        "answer change when only a person's gender does? |")
    for file in DOC_TABLES:  # written into a copy: the markers keep the text around the table
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text((ROOT / file).read_text(encoding="utf-8"), encoding="utf-8")
    tables = doc_tables(tmp_path, found)
    now, want = tables["docs/index.md"]
    assert "[WinoBias-V](protocols/winobias.md) |\n<!-- end of suites table -->" in want
    assert want.count("\n") == now.count("\n") + 1  # one row more, nothing else changed


def test_a_suite_without_a_question_is_an_error() -> None:
    silent = replace(SIXTH, questions={})
    with pytest.raises(ValueError, match="protocol 'winobias' runs suite 'bias_swap' but its manifest "
                                         "declares no question for it"):
        suites_table([silent], "README.md")


def test_write_docs_leaves_a_current_checkout_unchanged() -> None:
    assert write_docs(ROOT) == []


def test_the_site_nav_lists_each_protocol_page_from_its_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/hooks.py appends the protocol pages to the nav's Protocols section, named from the manifests
    in the order of their first suite number; mkdocs.yml names none of them."""
    from test_readme_options import docs_hooks

    hooks = docs_hooks()
    nav = hooks.protocol_nav()
    five = [{"LGIP (suites 1, 2a)": "protocols/lgip.md"}, {"S3E (suite 2b)": "protocols/s3e.md"},
            {"IMAVB (suite 3)": "protocols/imavb.md"}, {"AC-Bench (suite 4)": "protocols/acbench.md"},
            {"SPD-Faith (suite 5)": "protocols/spdfaith.md"}]
    assert [entry for entry in nav if entry in five] == five  # the first five, in suite-number order
    assert sorted(page for entry in nav for page in entry.values()) == sorted(
        f"protocols/{m.name}.md" for m in manifests())  # one entry per protocol, bundled later too
    assert "protocols/" not in (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("nav:")[1]
    monkeypatch.setattr(hooks, "manifests", lambda: (*manifests(), SIXTH))
    config = {"nav": [{"Home": "index.md"}, {"Protocols": [{"The suites": "suites.md"}]}]}
    protocols = hooks.on_config(config)["nav"][1]["Protocols"]
    assert protocols[0] == {"The suites": "suites.md"} and protocols[-1] == {
        "WinoBias-V (suite 99)": "protocols/winobias.md"}


def test_suite_numbers_sort_as_numbers() -> None:
    from faithtests.manifest import number_order

    assert sorted(["10", "2b", "1", "2a", "3", "9"], key=number_order) == ["1", "2a", "2b", "3", "9", "10"]
