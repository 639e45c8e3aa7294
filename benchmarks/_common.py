"""What every benchmark records beside its numbers, and how it writes them (results/*.json)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch


def environment() -> dict[str, Any]:
    """Machine facts that qualify a timing: load (other processes share the cores), threads, versions."""
    return {
        "load_average_1min": round(os.getloadavg()[0], 2),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def write_result(result: dict[str, Any], out: str | Path) -> None:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


def machine_load() -> dict[str, Any]:
    """What else is running: load averages and the busiest processes (``ps``), so a timing can be read
    against the machine it ran on (other agents' test runs share this 2-core machine)."""
    try:
        ps = subprocess.run(["ps", "-eo", "pcpu=,args="], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        ps = ""
    rows = []
    for line in ps.splitlines():
        cpu, _, args = line.strip().partition(" ")
        try:
            rows.append((float(cpu), args.strip()[:90]))
        except ValueError:
            continue
    rows.sort(reverse=True)
    me = os.getpid()
    return {"load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "processes_over_5pct_cpu": sum(1 for c, _ in rows if c > 5),
            "pytest_processes": sum(1 for _, a in rows if "pytest" in a),
            "busiest": [f"{c:.0f}% {a}" for c, a in rows[:6]], "benchmark_pid": me}


def _spin(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) % 2**31


@contextmanager
def competing_load(processes: int) -> Iterator[None]:
    """``processes`` busy (CPU-bound, pure Python) processes while the block runs; none for 0."""
    if processes <= 0:
        yield
        return
    stop = mp.Event()
    procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(processes)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    try:
        yield
    finally:
        stop.set()
        for p in procs:
            p.join()
