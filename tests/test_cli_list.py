"""``faithtests list`` (issue 49, item 5): every bundled suite, the glossary's metrics, the reference
models and spec prefixes, and the data names, as text and as JSON, read from where they are declared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faithtests import cli
from faithtests.catalog import SECTIONS
from faithtests.data.names import SHARED
from faithtests.manifest import data_table
from faithtests.models.checks import BUILTIN_PREFIXES
from faithtests.protocols import manifests

ROOT = Path(__file__).resolve().parents[1]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["list", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_names_everything(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys)
    assert rc == 0, err
    lines = out.splitlines()
    assert [line for line in lines if line.endswith(":") and not line.startswith(" ")] == [
        f"{s}:" for s in SECTIONS]
    names = {line.split()[0] for line in lines if line.startswith("  ")}
    bundled = {p.stem.removeprefix("test_") for p in (ROOT / "suites").glob("test_*.py")}
    assert bundled <= names and bundled <= {s for m in manifests() for s in m.suites}
    assert {"PR", "E_inv", "mis_v", "Bal", "DS_count"} <= names
    assert {"reference:clip", "reference:vlm", *BUILTIN_PREFIXES, "policy:"} <= names
    assert set(data_table(manifests(), SHARED)) <= names
    (pr,) = [line for line in lines if line.split()[:1] == ["PR"]]
    assert "Share of flips" in pr  # one item per line, with its description


def test_list_one_section_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "models", "--json")
    listed = json.loads(out)
    assert rc == 0 and list(listed) == ["models"]
    by = {e["name"]: e for e in listed["models"]}
    assert by["reference:clip"]["description"] == "open_clip image-text scorer"
    assert by["reference:vlm"]["kind"] == "reference" and by["hf:"]["kind"] == "prefix"
    rc, out, _ = _run(capsys, "suites", "--json")
    suites = {e["name"]: e for e in json.loads(out)["suites"]}
    assert len(suites) == len({s for m in manifests() for s in m.suites})  # a shared suite listed once
    assert all(e["protocols"] for e in suites.values())
    rc, out, _ = _run(capsys, "metrics", "--json")
    (bal,) = [e for e in json.loads(out)["metrics"] if e["name"] == "Bal"]
    assert bal["direction"] == "higher" and bal["description"].startswith("Balanced accuracy")


def test_list_refuses_an_unknown_section(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(capsys, "checkpoints")
    assert rc == 2 and "invalid choice: 'checkpoints'" in err and "Traceback" not in err


def test_list_without_fixtures_still_lists_the_prefixes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path / "absent"))  # an installed wheel, say
    rc, out, _ = _run(capsys, "models")
    assert rc == 0 and "reference:clip" not in out and "open_clip:" in out
