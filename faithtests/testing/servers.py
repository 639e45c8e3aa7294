"""Real OpenAI-compatible servers for tests and CI (issue 45): started by PID, never by name.

``transformers serve`` and vLLM's CPU build each run from their own venv (``$FAITH_SERVE_VENV`` /
``$FAITH_VLLM_VENV``, default ``.venv-serve`` / ``.venv-vllm`` in the checkout; ``.ci/run`` creates both,
docs/serving.md says how). :func:`serve` starts one on a free loopback port, waits for ``GET /health``,
yields its API root, and stops that process (terminate, then kill) however the caller leaves.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: How long a server may take to answer /health: vLLM's CPU build needs 40-180 s on a busy 2-core box.
READY_S = 300.0


VENVS = {"serve": ("FAITH_SERVE_VENV", ".venv-serve"), "vllm": ("FAITH_VLLM_VENV", ".venv-vllm")}
#: The model name vLLM serves the reference VLM under (transformers serve pins the path it was given).
VLLM_NAME = "reference-vlm"
#: ... and the reference omni model.
OMNI_NAME = "reference-omni"


def venv(kind: str) -> Path:
    """The venv of ``kind`` ("serve": transformers serve, "vllm")."""
    env, default = VENVS[kind]
    return Path(os.environ.get(env, ROOT / default))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def omni_for_vllm(model_dir: Path, dst: Path) -> Path:
    """The reference omni model (a bare Qwen2.5-Omni *thinker*) as vLLM loads one: vLLM registers the
    whole ``Qwen2_5OmniModel`` (thinker + talker), whose config nests the thinker's and whose weights
    carry a ``thinker.`` prefix. Without a talker it serves text answers, which is all the suites read.
    Same weights, same processor files; written to ``dst``."""
    import json  # local: test-server helpers, imported only where a server is started
    import shutil  # local: as above

    from safetensors.numpy import load_file, save_file  # local: as above

    dst.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        if f.is_file() and f.name not in ("config.json", "model.safetensors"):
            shutil.copy(f, dst / f.name)
    thinker = json.loads((model_dir / "config.json").read_text())
    wrapped = {"architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
               "enable_audio_output": False, "dtype": thinker.get("dtype"),
               "tie_word_embeddings": thinker.get("tie_word_embeddings", False), "thinker_config": thinker}
    (dst / "config.json").write_text(json.dumps(wrapped, indent=1))
    weights = load_file(model_dir / "model.safetensors")
    save_file({f"thinker.{k}": v for k, v in weights.items()}, dst / "model.safetensors",
              metadata={"format": "pt"})
    return dst


def omni_command(work: Path, port: int) -> tuple[list[str], str]:
    """As :func:`command`, for vLLM serving the reference omni model (its copy by :func:`omni_for_vllm`,
    written under ``work``) with vLLM's own Qwen2.5-Omni implementation, which takes video and audio
    (the transformers backend takes images only); per-request ``mm_processor_kwargs`` allowed, so a
    clip can carry ``use_audio_in_video`` (:mod:`~faithtests.models.api_media`). vLLM only: transformers
    serve needs torchcodec to decode a video, and torchcodec's wheels need CUDA's torch."""
    from faithtests.models.locations import fixtures_root  # local: as omni_for_vllm's imports

    model_dir = omni_for_vllm(fixtures_root() / "omni", work / "omni")
    return [str(venv("vllm") / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model",
            str(model_dir), "--served-model-name", OMNI_NAME, "--dtype", "float32",
            "--trust-request-mm-kwargs", "--host", "127.0.0.1", "--port", str(port)], OMNI_NAME


def command(kind: str, model_dir: Path, port: int) -> tuple[list[str], str]:
    """(the command line serving ``model_dir`` on ``port``, the model name its API answers to)."""
    v = venv(kind)
    if kind == "serve":
        # float32 like the in-process run: "auto" serves the reference's float16 weights in float16,
        # which flipped 3 of ~800 generated letters (letter-logit gaps <= 0.005) against float32
        return [str(v / "bin" / "transformers"), "serve", str(model_dir), "--dtype", "float32",
                "--host", "127.0.0.1", "--port", str(port)], str(model_dir)
    # float32 and the transformers backend: vLLM's own LLaVA loader does not read transformers 5's key
    # names; float32 so its log-probabilities are comparable with an in-process float32 run
    return [str(v / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", VLLM_NAME, "--model-impl", "transformers", "--dtype", "float32",
            "--host", "127.0.0.1", "--port", str(port)], VLLM_NAME


class ServerDied(RuntimeError):
    """The server exited or never answered /health; carries the end of its log."""


@contextmanager
def serve(cmd: list[str], port: int, log: Path | None = None,
          env: Mapping[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``cmd`` (a server on ``port``) until it answers ``/health``; yield (API root, process)."""
    # 1 thread: essential for vLLM on 2 cores (4-5 tok/s without it, 125-150 with it, issue 45);
    # a 1 GiB KV cache: vLLM's default does not fit beside the tests
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
            **(env or {})}
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, env=full, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_S
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_bytes()[-3000:].decode(errors="replace") if log is not None else ""
                raise ServerDied(f"{cmd[0]} did not come up on {url} within {READY_S:.0f} s "
                                 f"(exit {proc.poll()}): {tail}")
            time.sleep(1)
        yield f"{url}/v1", proc
    finally:
        stop(proc)
        if log is not None:
            out.close()  # type: ignore[union-attr]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server by its PID: terminate, then kill after 30 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False
