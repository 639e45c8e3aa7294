"""Fixtures shared by the test suite.

- ``pytester`` drives the plugin tests (tests/plugin/);
- ``shared_data``: the read-only real data (COCO-MINI, SugarCrepe) in ``../shared/data`` beside the
  checkout (``$FAITHTESTS_SHARED_DATA`` overrides). Missing, a test skips with the reason, except in CI
  (``CI=true``), where it fails: CI must never pass by skipping the real-photo tests;
- tiny models of every supported family, built once per session into a temp dir and loaded back through
  ``load_model`` exactly as a user's checkpoint would be (torch imported only when one is asked for);
- ``small_default_run``: the report of one ``pytest suites/ --faith-limit 6`` run, shared by the tests that
  need every suite, test and model stage but not every item. Its tests share one ``xdist_group``, so under
  ``-n 2`` one worker runs it once (each worker would otherwise run its own);
- one output cache for every suite run of the session (``$FAITH_TEST_CACHE``, see :func:`pytest_configure`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from faithtests.testing.families import VLM_FAMILIES  # torch-free at import
from faithtests.testing.suite_run import CACHE_ENV, run_small_default

#: The seed sweep (tests/seeds: ten default runs and their twins, ~25 min) runs once in CI, by itself:
#: ``FAITH_SEED_SWEEP=1 pytest tests/seeds -n 2`` (.ci/run); ``pytest tests/`` leaves it out.
collect_ignore = [] if os.environ.get("FAITH_SEED_SWEEP") else ["seeds"]
#: The served-model tests (tests/served: real vLLM and transformers serve, each in its own venv, minutes
#: of start-up) also run once in CI by themselves: ``FAITH_SERVED=1 pytest tests/served`` (.ci/run).
collect_ignore += [] if os.environ.get("FAITH_SERVED") else ["served"]
#: The docs' walkthroughs (tests/walkthrough: add a protocol, add a metric, each in a copy of the repository
#: with a suite run there, ~60 s of CPU) run once in CI by themselves, so the library tests keep their
#: budget: ``FAITH_WALKTHROUGH=1 pytest tests/walkthrough -n 2`` (.ci/run).
collect_ignore += [] if os.environ.get("FAITH_WALKTHROUGH") else ["walkthrough"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
#: Fixtures that start a costly run (suites in a subprocess) once per session or once per module: the
#: tests using one share an ``xdist_group``, so under ``-n 2`` one worker computes it once (each worker
#: that ran one of those tests would otherwise compute its own).
SESSION_RUNS = frozenset({"small_default_run"})
#: A fixture that only reads a session run (e.g. test_glossary_suites' ``default_run``) is not listed: its
#: tests must stay in the session run's group alone, not in a joined group xdist may send elsewhere, which
#: made a second worker compute ``small_default_run`` again.
MODULE_RUNS = frozenset({"ac_card", "premise_card", "spd_card", "clip_seed0", "reference_runs", "reports",
                         "nan_runs", "every_nan"})


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (COCO-MINI and SugarCrepe), or a skip naming it (a failure in CI)."""
    root = Path(os.environ.get("FAITHTESTS_SHARED_DATA", SHARED_DATA)).expanduser()
    missing = [d for d in ("coco-mini", "sugarcrepe") if not (root / d).is_dir()]
    if missing:
        why = (f"shared data missing: {', '.join(str(root / d) for d in missing)} (COCO-MINI and SugarCrepe "
               "live in ../shared/data beside the checkout; set FAITHTESTS_SHARED_DATA to point elsewhere)")
        if _in_ci():
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    return root


#: Three whole-run matrices (each runs every suite again under another arrangement: every model family's
#: tiny checkpoint, two Ray actors per model, sharded and merged) run in CI's own step, so ``pytest tests/``
#: keeps its 8-minute budget: ``FAITH_WHOLE_RUNS=1 pytest tests/ -m whole_runs -n 2`` (.ci/run). Without
#: the variable they are deselected (counted in pytest's summary line), never skipped as passed.
WHOLE_RUNS_ENV = "FAITH_WHOLE_RUNS"
WHOLE_RUNS = "whole_runs"


def pytest_configure(config: pytest.Config) -> None:
    """Registers :data:`WHOLE_RUNS`. Without ``$FAITH_TEST_CACHE`` (CI sets it to its main job's outputs),
    the session makes one empty output cache that every suite run given
    :func:`~faithtests.testing.suite_run.env_cache_args` reads and extends, so a fresh clone computes a
    bundled model's rows once, not once per test module that runs its suite (CI's way, filled as the
    tests go). Set by the controller before xdist starts its workers, which inherit it; removed at the
    end. ``FAITH_TEST_CACHE=`` (set, empty) runs every suite uncached."""
    config.addinivalue_line("markers", f"{WHOLE_RUNS}: a whole-run matrix; runs only with {WHOLE_RUNS_ENV}=1 "
                            "(CI's own step)")
    if CACHE_ENV in os.environ or hasattr(config, "workerinput"):
        return
    folder = tempfile.mkdtemp(prefix="faith-test-cache-")
    os.environ[CACHE_ENV] = folder

    def remove() -> None:
        os.environ.pop(CACHE_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)

    config.add_cleanup(remove)


def pytest_report_header(config: pytest.Config) -> str | None:
    if os.environ.get(WHOLE_RUNS_ENV):
        return None
    return (f"whole-run matrices (marked {WHOLE_RUNS}: families, Ray, shards) deselected; CI runs them: "
            f"{WHOLE_RUNS_ENV}=1 pytest tests/ -m {WHOLE_RUNS} -n 2")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the :data:`WHOLE_RUNS` tests unless ``$FAITH_WHOLE_RUNS`` is set. One group per costly
    shared run (see :data:`SESSION_RUNS`), marked before the plugin's trylast hook turns the marks into
    the node-id suffix that ``--dist loadgroup`` schedules by."""
    if not os.environ.get(WHOLE_RUNS_ENV):
        left = [item for item in items if item.get_closest_marker(WHOLE_RUNS) is not None]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = [item for item in items if item.get_closest_marker(WHOLE_RUNS) is None]
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        groups = sorted(SESSION_RUNS & names) + [f"{item.path.stem}.{f}" for f in sorted(MODULE_RUNS & names)]
        if len(groups) > 1 and SESSION_RUNS & names:  # xdist joins them into one other group (see above)
            raise pytest.UsageError(f"{item.nodeid} needs the session run and {groups[1:]}: a session run's "
                                    "tests must share its xdist_group alone")
        for group in groups:
            item.add_marker(pytest.mark.xdist_group(name=group))


@pytest.fixture(scope="session", autouse=True)
def one_thread_per_worker() -> None:
    """Under ``-n N`` each worker runs torch, BLAS and OpenMP on one thread: the thread policy the plugin
    applies to a suite run's models (faithtests.models.threads: auto, every model here is far below its
    size limit), for the models the library tests load themselves. Two workers at torch's default of one
    thread per core oversubscribed the two cores: test_vlm_families' batch-invariance and MLP-scale tests
    took 67.9 s, 14.2 s with one thread each (-n 2, nothing else running). A serial run keeps torch's
    default. (Suite runs in subprocesses apply the policy themselves; the variables it sets are marked as
    its own, never read as a user's setting.)"""
    from faithtests.models.threads import ThreadChoice, apply_threads, xdist_workers

    workers = xdist_workers(os.environ)
    if workers > 1:
        apply_threads(ThreadChoice(1, "library tests under xdist"), workers)


@pytest.fixture(scope="session", autouse=True)
def terminal_size_as_serial() -> None:
    """xdist's workers get ``COLUMNS=80`` and ``LINES=24`` from execnet; a serial run has none. The
    summary fits its tables to ``$COLUMNS`` (else 120 for a log), so without this a test's expected
    table rows would depend on ``-n``. Session-wide, before any test reads them."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


@pytest.fixture(scope="session")
def small_default_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report folder of ``pytest suites/ --faith-limit 6 --faith-allow-insufficient`` on the bundled
    reference models, run once per session; read-only (copy it to change it)."""
    return run_small_default(ROOT, tmp_path_factory.mktemp("small_default_run") / "report")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``tiny_dir(name)``: the directory of tiny model ``name`` (a VLM or omni family, or a dual encoder)."""
    from faithtests.testing.tiny import build_tiny
    from faithtests.testing.tiny_duals import build_tiny_open_clip

    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            out = tmp_path_factory.mktemp(f"tiny_{name}")
            built[name] = build_tiny_open_clip(out) if name == "open_clip" else build_tiny(name, out)
        return built[name]

    return get


@pytest.fixture(scope="session")
def load_tiny(tiny_dir: Callable[[str], Path]) -> Callable[..., Any]:
    """``load_tiny(name, **kw)`` through the public registry; memoised per (name, kwargs)."""
    from faithtests.models.registry import load_model

    loaded: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}

    def get(name: str, **kwargs: Any) -> Any:
        key = (name, tuple(sorted(kwargs.items())))
        if key not in loaded:
            prefix = "open_clip:local-dir:" if name == "open_clip" else "hf:"
            loaded[key] = load_model(f"{prefix}{tiny_dir(name)}", device="cpu", **kwargs)
        return loaded[key]

    return get


@pytest.fixture(scope="session", params=[pytest.param(f, marks=pytest.mark.xdist_group(f"family_{f}"))
                                         for f in VLM_FAMILIES])
def family(request: pytest.FixtureRequest) -> str:
    """Each VLM family of faithtests.testing.families (one xdist group per family: under ``-n 2`` one
    worker builds and loads it, instead of both)."""
    return str(request.param)


@pytest.fixture(scope="session")
def images() -> list[Any]:
    """Six seeded noise images of different sizes (distinct content, distinct aspect ratios)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    sizes = [(40, 30), (30, 40), (32, 32), (48, 36), (36, 48), (64, 64)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]
