"""The environment fingerprint stored in every scorecard: what produced these numbers.

Read without importing the heavy packages (versions come from ``importlib.metadata``), so building a
fingerprint never imports torch.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("faithtests", "torch", "torchvision", "transformers", "open_clip_torch", "numpy", "pytest",
            "pytest-xdist", "pillow", "scikit-learn", "threadpoolctl")
#: The thread pools' variables as this process ends (the user's, or the thread policy's where it set
#: them: ``FAITH_THREADS_SET``); each model's info holds the counts its own process used.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "FAITH_THREADS_SET",
                    "TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(root: Path) -> tuple[str | None, bool | None]:
    """(``git rev-parse HEAD`` in ``root``, whether tracked files differ from it); (None, None)
    outside a repository or without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (head or None), bool(dirty)


# text files whose content is hashed in a dataset digest (annotations, captions, splits); other files
# (images) count by relative name and size only, so hashing COCO costs a directory walk, not a read
_HASHED_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".txt", ".toml", ".yaml", ".yml")
_HASHED_MAX_BYTES = 256 * 2**20

# fingerprint fields that must agree for two runs' numbers to be comparable (baseline gate, merge):
# answer_mode too, since a generated letter and option scoring are different measurements (a paper
# row names its answer mode)
COMPARABLE = ("seed", "limit", "profile", "gate", "data", "thresholds", "answer_mode")
MERGE_FIELDS = ("model_specs", *COMPARABLE)


def _data_files(root: Path) -> list[Path]:
    """Every file under ``root``, following symlinked folders (a data layout often links ``val2017/``
    from elsewhere) but never the same folder twice; dot-files (``.DS_Store``, ``.ipynb_checkpoints``)
    are not data."""
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for here, dirs, names in os.walk(root, followlinks=True):
        st = os.stat(here)
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(here) / n for n in names if not n.startswith(".") and (Path(here) / n).is_file()]
    return sorted(out)


def dataset_digest(path: Path) -> dict[str, Any]:
    """A cheap content identity of a dataset location: sha256 over every file's relative name and size,
    plus the full content of its text files (``_HASHED_SUFFIXES``, up to 256 MiB each, streamed). Mtimes
    and the location itself are left out, so a copy elsewhere digests the same."""
    if not path.exists():
        return {"sha256": None, "files": 0, "bytes": 0, "missing": True}
    h = hashlib.sha256()
    files = size = 0
    for f in [path] if path.is_file() else _data_files(path):
        st = f.stat()
        rel = f.name if f == path else f.relative_to(path).as_posix()
        h.update(f"{rel}\0{st.st_size}\0".encode())
        files, size = files + 1, size + st.st_size
        if f.suffix.lower() in _HASHED_SUFFIXES and st.st_size <= _HASHED_MAX_BYTES:
            with f.open("rb") as fh:
                h.update(hashlib.file_digest(fh, "sha256").digest())
    return {"sha256": h.hexdigest(), "files": files, "bytes": size}


def thresholds_digest(files: Sequence[str]) -> str:
    """sha256 over the content of the thresholds files, in merge order (paths left out)."""
    h = hashlib.sha256()
    for name in files:
        try:
            h.update(hashlib.sha256(Path(name).read_bytes()).digest())
        except OSError:
            h.update(f"unreadable:{Path(name).name}".encode())
    return h.hexdigest()


def comparable(fp: Mapping[str, Any], fields: Sequence[str] = COMPARABLE) -> dict[str, Any]:
    """The values of ``fields`` as compared between runs; a field the fingerprint lacks (an older
    scorecard) is left out. ``data`` compares name -> content digest, not paths."""
    out: dict[str, Any] = {}
    for name in fields:
        if name == "thresholds":
            if "thresholds_sha256" in fp:
                out[name] = fp["thresholds_sha256"]
        elif name == "data":
            if isinstance(fp.get("data"), Mapping):
                out[name] = {k: (v.get("sha256") if isinstance(v, Mapping) else v)
                             for k, v in sorted(fp["data"].items())}
        elif name in fp:
            out[name] = fp[name]
    return out


def mismatches(a: Mapping[str, Any], b: Mapping[str, Any],
               fields: Sequence[str] = COMPARABLE) -> tuple[list[str], list[str]]:
    """(fields whose values differ, fields that one side does not record) between two fingerprints."""
    ca, cb = comparable(a, fields), comparable(b, fields)
    differ = [f for f in fields if f in ca and f in cb and ca[f] != cb[f]]
    unknown = [f for f in fields if (f in ca) != (f in cb)]
    return differ, unknown


def refused_mismatches(a: Mapping[str, Any], b: Mapping[str, Any], allowed: Iterable[str] = ()
                       ) -> tuple[list[str], str]:
    """The one comparability rule of the pytest gate, ``compare`` and ``history``: (the fields of
    :data:`COMPARABLE` in which ``a`` and ``b`` differ and ``allowed`` does not name, their description
    "limit (5 vs 10); seed (0 vs 1)"). Two runs of other seeds, limits, gates, data or thresholds do not
    measure the same thing: their deltas are no regression."""
    differ, _ = mismatches(a, b, COMPARABLE)
    refused = [f for f in differ if f not in set(allowed)]
    return refused, "; ".join(describe_mismatch(f, a, b) for f in refused)


def describe_mismatch(field: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """``field (A vs B)``, short: data sets by name and digest prefix."""
    va, vb = comparable(a, (field,)).get(field), comparable(b, (field,)).get(field)

    def short(v: Any) -> str:
        if isinstance(v, Mapping) and field == "data":  # name: digest prefix
            return "{" + ", ".join(f"{k}: {str(x)[:12]}" for k, x in v.items()) + "}"
        return str(v)[:12] if field == "thresholds" else repr(v)

    return f"{field} ({short(va)} vs {short(vb)})"


#: Per-model counters each test process keeps for itself; under xdist they are summed over the workers
#: (a caption two workers both saw counts twice in ``truncated_inputs``: an upper bound, never a loss).
PROCESS_COUNTERS = ("output_cache", "truncated_inputs", "endpoint", "work")
_NOT_SUMMED = {"limit": "keep", "dir": "keep", "longest_tokens": "max"}


def _sum_counts(a: Any, b: Any, key: str = "") -> Any:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return {k: _sum_counts(a[k], b[k], k) if k in a and k in b else (a[k] if k in a else b[k])
                for k in (*a, *(k for k in b if k not in a))}
    rule = _NOT_SUMMED.get(key)
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    if numbers and rule is None:
        return a + b
    if numbers and rule == "max":
        return max(a, b)
    return a


def merge_worker_models(
    by_worker: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> dict[str, dict[str, Any]]:
    """Model info per label from every test process (``{worker: {label: info}}``): the process
    counters (:data:`PROCESS_COUNTERS`) are summed, every other field is the model's own (the same
    in each process)."""
    out: dict[str, dict[str, Any]] = {}
    for worker in sorted(by_worker):
        for label, info in by_worker[worker].items():
            cur = out.setdefault(label, {})
            for k, v in info.items():
                cur[k] = _sum_counts(cur[k], v) if k in PROCESS_COUNTERS and k in cur else v
    return out


def build_fingerprint(
    *,
    root: Path,
    start: str,
    end: str,
    argv: Sequence[str],
    seed: int,
    device: str | None = None,
    dtype: str | None = None,
    model_specs: Mapping[str, str] | None = None,
    models: Mapping[str, Mapping[str, Any]] | None = None,
    gate: str | None = None,
    tolerance: str | None = None,
    thresholds_files: Sequence[str] = (),
    workers: int | None = None,
    limit: int | None = None,
    data: Mapping[str, Mapping[str, Any]] | None = None,
    answer_mode: str | None = None,
) -> dict[str, Any]:
    """Everything needed to reproduce (or distrust) a run. ``models``: label -> info recorded by the
    model fixtures (spec, checkpoint hash, family, ...); ``model_specs``: label -> spec from the options;
    ``data``: name -> :func:`dataset_digest` (plus its path); ``answer_mode``: --faith-answer-mode (each
    VLM's own, after the fallback of a model without log-probabilities, is in its ``models`` entry)."""
    commit, dirty = git_commit(root)
    return {
        "packages": package_versions(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "device": device,
        "dtype": dtype,
        "seed": seed,
        "answer_mode": answer_mode,
        "gate": gate,
        "tolerance": tolerance,
        "limit": limit,
        "data": {k: dict(v) for k, v in sorted((data or {}).items())},
        "thresholds_files": list(thresholds_files),
        "thresholds_sha256": thresholds_digest(thresholds_files),
        "model_specs": dict(sorted((model_specs or {}).items())),
        "models": {k: dict(v) for k, v in sorted((models or {}).items())},
        "git_commit": commit,
        "git_dirty": dirty,
        "start": start,
        "end": end,
        "argv": list(argv),
        "workers": workers,
        "thread_variables": {v: os.environ[v] for v in THREAD_VARIABLES if v in os.environ},
    }
