"""The suite's options: ``--faith-sage`` is read strictly into SageConfig (a typo is a usage error, not a
silently ignored key), ``--faith-spd-judge`` loads a callable or says why not."""

from __future__ import annotations

import pytest

from faithtests.protocols.spdfaith.fixtures import load_judge, parse_sage, spdfaith_datasets
from faithtests.protocols.spdfaith.sage import SageConfig


def test_parse_sage_reads_every_kind_of_field() -> None:
    assert parse_sage("") is None
    cfg = parse_sage("alpha=0.2, eta=0.25,top_k=4,stages=see+generate,renormalize=true,alpha0=none")
    assert cfg == SageConfig(alpha=0.2, eta=0.25, top_k=4, stages=("see", "generate"), renormalize=True)
    assert parse_sage("shallow_layers=3,renormalize=0") == SageConfig(shallow_layers=3, renormalize=False)


@pytest.mark.parametrize(("text", "says"), [
    ("alpah=0.2", "alpah=0.2"),  # a typo names the known keys
    ("alpha", "KEY=VALUE"),
    ("top_k=three", "top_k"),
    ("renormalize=yes", "renormalize"),
    ("alpha=2", "alpha"),  # outside the config's own range
])
def test_parse_sage_refuses_what_it_cannot_read(text: str, says: str) -> None:
    with pytest.raises(pytest.UsageError, match=says):
        parse_sage(text)


def test_load_judge_names_what_is_wrong() -> None:
    judge = load_judge("tests.protocols.spdfaith.judges:nothing_grounded")
    assert judge.name == "tests.protocols.spdfaith.judges:nothing_grounded"
    for spec, says in (("no_colon", "MODULE:CALLABLE"), ("nope.nothing:fn", "cannot load"),
                       ("faithtests.protocols.spdfaith.judge:EDIT_TYPES", "not callable")):
        with pytest.raises(pytest.UsageError, match=says):
            load_judge(spec)


def test_datasets_follow_the_data_option(pytestconfig: pytest.Config) -> None:
    assert spdfaith_datasets(pytestconfig)[0] == "world"
