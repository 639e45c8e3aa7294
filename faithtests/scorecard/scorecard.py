"""The scorecard of one run: fingerprint + test records, with JSON I/O and an atomic writer.

JSON layout (``schema_version`` 1) is documented in the README ("Scorecard JSON").
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithtests.scorecard.fingerprint import MERGE_FIELDS, describe_mismatch, mismatches
from faithtests.scorecard.glossary import merge_glossaries
from faithtests.scorecard.model import (
    SCHEMA_VERSION,
    Exemplar,
    MalformedResult,
    MetricResult,
    TestRecord,
    test_key,
)


class ScorecardError(ValueError):
    """A scorecard file that cannot be read: names the file and what is wrong."""


@dataclass
class Scorecard:
    fingerprint: dict[str, Any] = field(default_factory=dict)
    tests: list[TestRecord] = field(default_factory=list)
    status: str = "complete"  # complete | interrupted | incomplete (a test errored or crashed) | superseded
    # filled by the baseline gate: list of regression dicts (see faithtests.scorecard.baseline)
    regressions: list[dict[str, Any]] = field(default_factory=list)
    baseline: str | None = None
    # run identity for history across checkpoints: {"name": str, "step": int | None, "started": ISO time}
    run: dict[str, Any] = field(default_factory=dict)
    # plain-language definitions of the recorded metrics, keyed by base name (no "[slice]"):
    # {name: {"sentence", "direction", "unit", "paper", "equation"}} (faithtests.scorecard.glossary)
    glossary: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def results(self) -> list[MetricResult]:
        out = [r for t in self.tests for r in t.results]
        return sorted(out, key=lambda r: r.key)

    def sorted(self) -> Scorecard:
        """Deterministic order (by node id) so serial and ``-n`` runs serialise identically."""
        return Scorecard(
            fingerprint=self.fingerprint,
            tests=sorted(self.tests, key=lambda t: t.test),
            status=self.status,
            regressions=self.regressions,
            baseline=self.baseline,
            run=self.run,
            glossary=self.glossary,
        )

    def exemplars_by_test(self) -> dict[str, list[Exemplar]]:
        return {t.test: t.exemplars for t in self.tests if t.exemplars}

    def to_json(self) -> dict[str, Any]:
        sc = self.sorted()
        return {
            "schema_version": SCHEMA_VERSION,
            "status": sc.status,
            "fingerprint": sc.fingerprint,
            "results": [r.to_json() for r in sc.results],
            "exemplars": {k: [e.to_json() for e in v] for k, v in sc.exemplars_by_test().items()},
            "tests": [t.to_json() for t in sc.tests],
            "baseline": sc.baseline,
            "regressions": sc.regressions,
            "run": sc.run,
            "glossary": dict(sorted(sc.glossary.items())),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], *, source: str = "<json>") -> Scorecard:
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ScorecardError(f"{source}: schema_version {version!r} is not {SCHEMA_VERSION}")
        try:
            tests = [TestRecord.from_json(t) for t in d["tests"]]
        except MalformedResult as exc:  # a NaN or a non-number: name the result, never read it as undefined
            raise ScorecardError(f"{source}: {exc}") from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ScorecardError(f"{source}: malformed test record: {exc!r}") from exc
        run = d.get("run", {})
        step = run.get("step") if isinstance(run, dict) else None
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            # history orders runs by step: a step read as "none" would silently move this run last
            raise ScorecardError(f"{source}: run.step {step!r} is not a whole number "
                                 "(null when there is none)")
        try:
            return cls(
                fingerprint=dict(d.get("fingerprint", {})),
                tests=tests,
                status=str(d.get("status", "complete")),
                regressions=list(d.get("regressions", [])),
                baseline=d.get("baseline"),
                run=dict(d.get("run", {})),
                glossary={str(k): dict(v) for k, v in dict(d.get("glossary", {})).items()},
            )
        except (TypeError, ValueError) as exc:
            raise ScorecardError(f"{source}: malformed scorecard: {exc!r}") from exc


def scorecard_path(path: str | os.PathLike[str]) -> Path:
    """Accept a report directory or a ``scorecard.json`` path."""
    p = Path(path)
    return p / "scorecard.json" if p.is_dir() else p


def read_scorecard(path: str | os.PathLike[str]) -> Scorecard:
    p = scorecard_path(path)
    if not p.exists():
        raise ScorecardError(f"{p}: no such scorecard")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ScorecardError(f"{p}: not a scorecard (not UTF-8 text: {exc.reason} at byte {exc.start})"
                             ) from exc
    except json.JSONDecodeError as exc:
        raise ScorecardError(f"{p}: not valid JSON ({exc})") from exc
    except OSError as exc:
        raise ScorecardError(f"{p}: cannot read ({exc.strerror or exc})") from exc
    if not isinstance(data, dict):
        raise ScorecardError(f"{p}: top level is not an object")
    return Scorecard.from_json(data, source=str(p))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write via a temp file in the same directory + ``os.replace``: readers never see half a file,
    and an interrupted write leaves the previous file intact."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    # mkstemp creates 0600; a report should get the permissions any new file would (umask)
    umask = os.umask(0o22)
    os.umask(umask)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~umask)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_scorecard(scorecard: Scorecard, path: str | os.PathLike[str]) -> Path:
    p = scorecard_path(path) if Path(path).suffix != ".json" else Path(path)
    # compact: indentation was 15% of the file (9.2 MB on the default run), and nobody reads it unformatted
    atomic_write_text(p, json.dumps(scorecard.to_json(), separators=(",", ":"), sort_keys=False,
                                    allow_nan=False))
    return p


def check_shards(parts: list[Scorecard], names: list[str] | None = None) -> None:
    """Shards belong together when their fingerprints agree on :data:`MERGE_FIELDS` (models, seed,
    limit, gate, data sets, thresholds); a field one shard does not record (older scorecard) is not
    checked. Raises :class:`ScorecardError` naming the first field that differs and the two shards."""
    labels = names or [f"shard {i + 1}" for i in range(len(parts))]
    for part, name in zip(parts, labels, strict=True):
        if part.status == "superseded":  # a newer run on its report directory started: not this run's
            raise ScorecardError(f"{name} is superseded: a newer run on its report directory started after "
                                 "it, so it is not that directory's current result; merge the current shards")
    check_checkpoints(parts, labels)
    first = parts[0].fingerprint
    for part, name in zip(parts[1:], labels[1:], strict=True):
        differ, _ = mismatches(first, part.fingerprint, MERGE_FIELDS)
        if differ:
            what = "; ".join(describe_mismatch(f, first, part.fingerprint) for f in differ)
            raise ScorecardError(f"{labels[0]} and {name} are not shards of one run: they differ in {what}")
    check_shard_plan(parts, labels)


def check_checkpoints(parts: list[Scorecard], labels: list[str]) -> None:
    """One label is one checkpoint: shards whose fingerprints record different checkpoint digests
    (``models[label].checkpoint_sha256``) for the same label are not one run (the merge would keep the
    last shard's digest and mix two models' results)."""
    seen: dict[str, tuple[str, str]] = {}  # label -> (digest, shard)
    for part, name in zip(parts, labels, strict=True):
        models = part.fingerprint.get("models")
        for label, info in (models.items() if isinstance(models, dict) else ()):
            digest = info.get("checkpoint_sha256") if isinstance(info, dict) else None
            if not digest:
                continue
            first = seen.setdefault(str(label), (str(digest), name))
            if first[0] != str(digest):
                raise ScorecardError(
                    f"{first[1]} and {name} are not shards of one run: model {label!r} has checkpoint "
                    f"sha256 {first[0][:12]} in one and {str(digest)[:12]} in the other")


def check_shard_plan(parts: list[Scorecard], labels: list[str]) -> None:
    """``--faith-shard`` runs (fingerprint ``shard``): one plan (the same tests split the same way) and
    every shard 1..N exactly once, so the merge has every test once."""
    recorded = [p.fingerprint.get("shard") for p in parts]
    if not any(isinstance(s, dict) for s in recorded):
        return  # shards split by hand (test paths, -k): nothing recorded to check
    shards: list[dict[str, Any]] = []
    for s, name in zip(recorded, labels, strict=True):
        if not isinstance(s, dict):
            raise ScorecardError(f"{name} is not a --faith-shard run, {labels[0]} is: not shards of one run")
        shards.append(s)
    first, n = shards[0], int(shards[0]["count"])
    for s, name in zip(shards, labels, strict=True):
        if (s["count"], s["plan"]) != (first["count"], first["plan"]):
            raise ScorecardError(
                f"{labels[0]} and {name} are not shards of one run: they split the tests differently "
                f"(shard {first['index']}/{n}, plan {str(first['plan'])[:12]} vs shard "
                f"{s['index']}/{s['count']}, plan {str(s['plan'])[:12]}: another test selection or "
                "recorded group durations)")
    seen: dict[int, str] = {}
    for s, name in zip(shards, labels, strict=True):
        if int(s["index"]) in seen:
            raise ScorecardError(f"{seen[int(s['index'])]} and {name} are both shard {s['index']}/{n}")
        seen[int(s["index"])] = name
    absent = [f"{k}/{n}" for k in range(1, n + 1) if k not in seen]
    if absent:
        raise ScorecardError(f"shard(s) {', '.join(absent)} missing: merge all {n} shards of the run")


def merge_scorecards(parts: list[Scorecard], names: list[str] | None = None) -> Scorecard:
    """Shards of one run -> one scorecard. A test present in two shards is an error (not one run), and
    so are shards whose fingerprints differ (:func:`check_shards`)."""
    if not parts:
        raise ScorecardError("merge needs at least one scorecard")
    check_shards(parts, names)
    seen: dict[str, TestRecord] = {}
    for part in parts:
        for t in part.tests:
            if test_key(t.test) in seen:
                raise ScorecardError(f"test {t.test!r} appears in more than one shard")
            seen[test_key(t.test)] = t
    fp = dict(parts[0].fingerprint)
    fp.pop("shard", None)  # the merge is the whole run (``shards`` counts its parts)
    starts = [str(p.fingerprint["start"]) for p in parts if p.fingerprint.get("start")]
    ends = [str(p.fingerprint["end"]) for p in parts if p.fingerprint.get("end")]
    if starts:
        fp["start"] = min(starts)
    if ends:
        fp["end"] = max(ends)
    models: dict[str, Any] = {}
    for p in parts:
        models.update(p.fingerprint.get("models", {}))
    if models:
        fp["models"] = models
    fp["shards"] = len(parts)
    statuses = {p.status for p in parts} - {"complete"}
    status = "interrupted" if "interrupted" in statuses else min(statuses, default="complete")
    return Scorecard(fingerprint=fp, tests=list(seen.values()), status=status,
                     run=merged_run(parts, names),
                     glossary=merge_glossaries(p.glossary for p in parts)).sorted()


def merged_run(parts: list[Scorecard], names: list[str] | None = None) -> dict[str, Any]:
    """The ``run`` of shards of one run: one name and step (else they are not one run), the earliest start."""
    labels = names or [f"shard {i + 1}" for i in range(len(parts))]
    runs = [(name, p.run) for p, name in zip(parts, labels, strict=True) if p.run]  # older shards: none
    if not runs:
        return {}
    first_name, first = runs[0]
    for name, run in runs[1:]:
        if (run.get("name"), run.get("step")) != (first.get("name"), first.get("step")):
            raise ScorecardError(
                f"{first_name} and {name} are not shards of one run: run {first.get('name')!r} step "
                f"{first.get('step')} vs run {run.get('name')!r} step {run.get('step')}")
    starts = [str(r["started"]) for _, r in runs if r.get("started")]
    return {**first, "started": min(starts)} if starts else dict(first)
