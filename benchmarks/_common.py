"""What every benchmark records beside its numbers, and how it writes them (results/*.json)."""

from __future__ import annotations

import json
import os
import platform
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
