"""Served vs in-process, one run (issue 45): the reference VLM served by a real ``transformers serve`` or
vLLM (CPU build), and ``reference:vlm`` in this process, side by side in ONE ``pytest suites/`` run
(``--faith-vlm local=reference:vlm --faith-vlm served=openai:MODEL@URL``).

It fails (exit 1) unless, for every result the served model recorded, the local model recorded the same
metric on the same slice with the same verdict and a value within ``NOISE`` (module constant, below),
and every test the served model skipped is *not applicable* with its reason (a white-box check). It
writes the timings (server ready, the whole run, the summed test durations of each model) and the
comparison to ``benchmarks/results/served_<server>.json``. CI runs it for both servers. ``transformers
serve`` returns no log-probabilities, so its run has ``--faith-answer-mode generated``: both forms answer
multiple-choice prompts by generated letters there.

    python benchmarks/bench_served.py --server serve|vllm [--model vlm|omni] [--out FILE] [--select EXPR]

``--model omni`` (vLLM only): the reference omni model served by vLLM's own Qwen2.5-Omni implementation
(clips with their soundtracks, :mod:`faithtests.models.api_media`) beside ``reference:omni``, over the
premise suite, the one suite that gives it clips. Its rule is different and written here: every verdict
equal, every served test run or not applicable with its reason; the values are compared and their
largest difference written down, not held to ``NOISE``, because vLLM lays out an interleaved clip's
M-RoPE positions differently from transformers (docs/serving.md), which moves the omni model's
log-probabilities by up to ~0.3 on a clip and its metrics by up to ~0.1.

The server is started and stopped by its PID (:mod:`faithtests.testing.servers`), from its own venv.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine_load, write_result

from faithtests.models.locations import fixtures_root
from faithtests.testing import servers

#: The written noise rule for served vs in-process values: answers are equal, and a value computed from
#: log-probabilities (a mean P(option), a softmax margin) moves by at most the served log-probability
#: error (measured <= 1.4e-5 on vLLM's float32 CPU kernels, tests/models/test_openai_served.py) times
#: its sensitivity; 1e-3 absolute leaves room for both and is far below any gate's margin.
NOISE = 1e-3


def _key(r: dict[str, Any]) -> tuple[str, str, str, str]:
    m = r["model"]
    test = r["test"].replace(f"-{m}-", "-@-").replace(f"-{m}]", "-@]")
    return test, r["metric"], str(r["slice"]), str(r["variant"])


def compare(card: dict[str, Any], noise: float | None = NOISE) -> dict[str, Any]:
    """What the served model recorded against the local one's (module doc); ``noise`` None: values are
    compared and reported, verdicts must be equal (the omni rule)."""
    by: dict[str, dict[tuple[str, str, str, str], dict[str, Any]]] = {}
    for r in card["results"]:
        by.setdefault(r["model"], {})[_key(r)] = r
    local, served = by.get("local", {}), by.get("served", {})
    problems: list[str] = []
    worst = 0.0
    for k, s in served.items():
        ref = local.get(k)
        if ref is None:
            problems.append(f"{k}: recorded served, not local")
            continue
        if s["passed"] != ref["passed"]:
            problems.append(f"{k}: verdict served {s['passed']} vs local {ref['passed']}")
        a, b = s["value"], ref["value"]
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            if repr(a) != repr(b):
                problems.append(f"{k}: value served {a} vs local {b}")
            continue
        worst = max(worst, abs(a - b))
        if noise is not None and abs(a - b) > noise:
            problems.append(f"{k}: value served {a} vs local {b}")
    na = 0
    for t in card["tests"]:
        if "-served" not in t["test"] or t["outcome"] == "passed":
            continue
        if t["outcome"] == "skipped" and "not applicable" in t["message"]:
            na += 1
        else:
            problems.append(f"{t['test']}: served {t['outcome']}: {t['message'][:200]}")
    duration = {m: round(sum(t["duration"] for t in card["tests"] if f"-{m}" in t["test"]), 1)
                for m in ("local", "served")}
    return {"results_compared": len(served), "worst_abs_diff": worst, "served_not_applicable": na,
            "test_seconds": duration, "problems": problems}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=("serve", "vllm"), required=True)
    ap.add_argument("--model", choices=("vlm", "omni"), default="vlm")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--select", default="", help="a pytest -k expression (default: every test)")
    args = ap.parse_args()
    omni = args.model == "omni"
    if omni and args.server != "vllm":
        ap.error("--model omni is served by vLLM only (servers.omni_command says why)")
    name_part = f"{args.server}_omni" if omni else args.server
    out = args.out or Path(__file__).parent / "results" / f"served_{name_part}.json"
    tmp = Path(tempfile.mkdtemp(prefix="served-"))
    port = servers.free_port()
    cmd, name = (servers.omni_command(tmp, port) if omni
                 else servers.command(args.server, fixtures_root() / "vlm", port))
    t0 = time.monotonic()
    with servers.serve(cmd, port, log=tmp / "server.log") as (url, _):
        ready = time.monotonic() - t0
        before = machine_load()
        suites = "suites/test_premise_rejection.py" if omni else "suites/"  # (the omni's clips: premise)
        run = [sys.executable, "-m", "pytest", suites, "-q", "-p", "no:cacheprovider", "--faith-no-progress",
               "--faith-vlm", f"local=reference:{args.model}",
               "--faith-vlm", f"served=openai:{name}@{url}",
               # transformers serve returns no log-probabilities: both forms answer by generated
               # letters, so what serving changed is compared answer for answer
               *(["--faith-answer-mode", "generated"] if args.server == "serve" else []),
               "--faith-report", str(tmp / "report"), *(["-k", args.select] if args.select else [])]
        t1 = time.monotonic()
        rc = subprocess.run(run, cwd=Path(__file__).resolve().parents[1]).returncode
        wall = time.monotonic() - t1
    card = json.loads((tmp / "report" / "scorecard.json").read_text())
    rule = None if omni else NOISE
    result = {"server": args.server, "model": args.model, "command": " ".join(run), "exit": rc,
              "server_ready_s": round(ready, 1), "suite_run_s": round(wall, 1),
              "noise_rule": rule if rule is not None else "verdicts equal; values reported (module doc)",
              **compare(card, rule),
              "machine_before": before, "machine_after": machine_load()}
    write_result(result, out)
    ok = rc == 0 and not result["problems"] and result["results_compared"] > 0
    print(f"served ({args.server}, {args.model}) vs in-process: {'equal' if ok else 'DIFFERENT'}",
          file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
