"""The default run's work counters against their floors (issue 47): machine-independent, so one run.

Runs ``pytest suites/`` once (serial, no output cache) and reads each model's ``work`` entry from the
scorecard's fingerprint (``faithtests.models.work``): the images, clips and soundtracks that went
through the towers (``*_encoded``) and that the forwards were handed (``*_inputs``), each divided by
the distinct inputs (the floor: each encoded once; the processor memos count them, plus the probe
inputs the load's checks preprocessed). Also the positions
computed and their padding share. Writes ``benchmarks/results/work_default_run.json``::

    python benchmarks/bench_work.py [--out FILE] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine_load, write_result

ROOT = Path(__file__).resolve().parents[1]
#: (what went through the tower, what the forwards were handed, the floor)
TOWERS = (("images_encoded", "image_inputs", "distinct_images"),
          ("videos_encoded", "video_inputs", "distinct_videos"),
          ("audio_encoded", "audio_inputs", "distinct_audio"))


def ratios(work: dict[str, Any]) -> dict[str, float | None]:
    """Inputs through each tower per distinct input (1.0 is the floor; encode_once's memo), the inputs
    the forwards were handed per distinct input (what the towers would have run without it), and the
    padding share."""
    out: dict[str, float | None] = {}
    for encoded, handed, floor in TOWERS:
        base = work.get(floor)
        for name in (encoded, handed):
            n = work.get(name) or 0
            out[f"{name}_per_distinct"] = round(n / base, 3) if n and base else None
    positions = work.get("positions", 0)
    out["padding_share"] = round(work.get("padding", 0) / positions, 4) if positions else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "work_default_run.json"))
    ap.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report"
        cmd = [sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider",
               "--faith-no-progress", "--faith-report", str(report), *args.extra]
        before, start = machine_load(), time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        seconds = round(time.perf_counter() - start, 1)
        if proc.returncode not in (0, 1):
            sys.exit(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        models = json.loads((report / "scorecard.json").read_text())["fingerprint"]["models"]
    work = {label: {"work": info["work"], "ratios": ratios(info["work"])}
            for label, info in sorted(models.items()) if info.get("work")}
    write_result({"command": " ".join(cmd[1:]), "exit": proc.returncode, "seconds": seconds,
                  "machine_before": before, "models": work}, args.out)


if __name__ == "__main__":
    main()
