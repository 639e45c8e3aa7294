"""What the plugin reads off a collected test: its result key, suite, model and variant labels and
dataset (used by the ``faith`` fixture, the report hook and ``--faith-shard``)."""

from __future__ import annotations

import pytest

from faithtests.plugin.model_spec import ModelSpec
from faithtests.scorecard.model import test_key


def suite_name(item: pytest.Item) -> str:
    """``@pytest.mark.suite("name")``, else the module name without its ``test_`` prefix."""
    marker = item.get_closest_marker("suite")
    if marker is not None:
        name = marker.args[0] if marker.args else marker.kwargs.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{item.nodeid}: @pytest.mark.suite needs a non-empty name, got {name!r}")
        return name
    module = getattr(item, "module", None)
    stem = module.__name__.rpartition(".")[2] if module is not None else item.path.stem
    return stem.removeprefix("test_")


def _label(value: object) -> str | None:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    label = getattr(value, "label", None)
    return label if isinstance(label, str) else None


def record_test_id(item: pytest.Item) -> str:
    """The test's result key, ``<test file name>::<test name[params]>`` (:func:`test_key`): the same
    whatever pytest's rootdir, cwd or option values, and without the ``@group`` suffix xdist adds under
    ``--dist loadgroup``, so serial and parallel runs record the same keys (and baselines match)."""
    nodeid = item.nodeid
    groups = [str(m.args[0] if m.args else m.kwargs.get("name", "default"))
              for m in item.iter_markers("xdist_group")]
    for suffix in {"@" + "_".join(sorted(set(groups))), *("@" + g for g in groups)} if groups else ():
        if nodeid.endswith(suffix):
            return test_key(nodeid.removesuffix(suffix))
    return test_key(nodeid)


def model_param(item: pytest.Item) -> ModelSpec | None:
    """The model a test is parametrised with (a ``faith_scorer`` / ``faith_vlm`` parameter), if any."""
    params: dict[str, object] = getattr(getattr(item, "callspec", None), "params", {})
    return next((v for v in params.values() if isinstance(v, ModelSpec)), None)


def callspec_labels(item: pytest.Item) -> tuple[str, str]:
    """(model, variant): the label of the model parameter (or of a plain parameter named ``model``)
    and the ``variant`` parameter, if any."""
    params: dict[str, object] = getattr(getattr(item, "callspec", None), "params", {})
    spec = model_param(item)
    model = spec.label if spec is not None else (_label(params.get("model")) or "")
    variant = _label(params["variant"]) if "variant" in params else None
    return model, variant or "base"


def callspec_dataset(item: pytest.Item) -> str:
    """The dataset a test runs on: the value of its dataset parameter (a protocol fixture named
    ``*_data`` parametrised with the dataset's name, e.g. ``flip_data="world"``), "" when it has none."""
    params: dict[str, object] = getattr(getattr(item, "callspec", None), "params", {})
    return next((v for k, v in params.items() if k.endswith("_data") and isinstance(v, str)), "")


def wants_record(item: pytest.Item) -> bool:
    """Tests that use the ``faith`` fixture or carry the ``suite`` marker are recorded."""
    return "faith" in getattr(item, "fixturenames", ()) or item.get_closest_marker("suite") is not None
