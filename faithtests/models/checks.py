"""Checks of a model spec and its files that need no torch, so the plugin can run them at configure time,
before any model loads (and ``load_model`` runs them first, so both report a mistake the same way).

What is checked: the prefix is known (a close miss gets a did-you-mean), the files and directories a
spec names exist, configs are readable JSON, an open_clip directory holds a weights file (open_clip
would otherwise run a randomly initialised model), and every ``.safetensors`` header is intact and
covers the file (a truncated download is named here, not deep inside a loader). Whether the weights
fit the architecture needs the model: the adapters check that when loading.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faithtests.models.errors import CheckpointError, ModelNotFoundError, ModelSpecError
from faithtests.models.locations import WEIGHT_SUFFIXES, fixtures_root
from faithtests.models.plugins import PY_PREFIX, plugin_prefixes, py_target

BUILTIN_PREFIXES = ("reference:", "open_clip:", "hf:", "vlm-scorer:", PY_PREFIX)
#: open_clip's own choice of a weights file in a local-dir (open_clip.factory._find_checkpoint_in_dir).
_OPEN_CLIP_PREFERRED = ("open_clip_model.safetensors", "open_clip_pytorch_model.safetensors",
                        "open_clip_pytorch_model.bin", "open_clip_pytorch_model.pth", "model.safetensors",
                        "pytorch_model.bin", "pytorch_model.pth", "model.pth")


#: Threshold families the built-in adapters declare whatever the checkpoint: open_clip / HF dual encoders
#: "clip" or "siglip", and the score kinds ("cosine"; a VLM scorer's "caption_mean_logprob"). An HF
#: adapter also declares its config's model_type (any transformers model type).
BUILTIN_FAMILIES = ("clip", "siglip", "cosine", "caption_mean_logprob")


def is_plugin_spec(spec: str) -> bool:
    """A ``py:`` spec or one of a registered entry-point prefix: its family is the plug-in's to say."""
    return spec.startswith(PY_PREFIX) or spec.split(":", 1)[0] in plugin_prefixes()


def unknown_families(names: Sequence[str]) -> list[str]:
    """The names no adapter can declare: neither built-in nor a transformers model type."""
    rest = [n for n in names if n.lower() not in BUILTIN_FAMILIES]
    if not rest:  # the common case: no transformers import (about a second) at every start
        return []
    try:
        from transformers.models.auto import configuration_auto  # lazy: the plugin imports this module
    except ImportError:
        return rest
    types: Mapping[str, str] = getattr(configuration_auto, "CONFIG_MAPPING_NAMES", {})  # not re-exported
    return [n for n in rest if n.lower() not in types]


def known_prefixes() -> tuple[str, ...]:
    """The built-in prefixes, then those packages register (entry-point group ``faithtests.models``)."""
    return (*BUILTIN_PREFIXES, *(f"{name}:" for name in plugin_prefixes()))


def read_json(spec: str, path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or one line naming the file and what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{spec}: config {path} is not a text file (corrupt or not a config)") from None
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"{spec}: config {path} is not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{spec}: config {path} holds a JSON {type(data).__name__}, not an object")
    return data


def safetensors_shapes(spec: str, path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape from a ``.safetensors`` header, after checking that the header parses and that
    the file holds every byte it declares (a truncated copy fails here, naming the file)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if length < 2 or length > size - 8:
            raise CheckpointError(f"{spec}: weights file {path} is not a safetensors file or is truncated "
                                  f"(no valid header in its {size} bytes)")
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{spec}: weights file {path} is not a safetensors file "
                              "(its header is not JSON)") from None
    shapes: dict[str, list[int]] = {}
    end = 0
    for name, entry in header.items() if isinstance(header, dict) else ():
        if name == "__metadata__":
            continue
        try:
            shapes[name] = [int(n) for n in entry["shape"]]
            end = max(end, int(entry["data_offsets"][1]))
        except (TypeError, KeyError, IndexError, ValueError):
            raise CheckpointError(f"{spec}: weights file {path} has a corrupt safetensors header "
                                  f"(entry {name!r})") from None
    if 8 + length + end > size:
        raise CheckpointError(f"{spec}: weights file {path} is truncated: its header declares "
                              f"{8 + length + end} bytes, the file has {size}")
    return shapes


def header_parameter_count(paths: Sequence[Path]) -> int | None:
    """Elements of every tensor in the ``.safetensors`` files among ``paths`` (folders one level), read
    from their headers without loading a weight; None when any weight file there is not safetensors
    (or there is none). Close to ``parameters()`` (a tied weight is stored once, as it counts it once)
    but not equal to it: saved buffers count too, and a folder holding two copies of the weights counts
    both. Only the thread policy's size rule uses it, for loaded and deferred adapters alike."""
    files: list[Path] = []
    for p in paths:
        files += sorted(f for f in p.iterdir() if f.is_file()) if p.is_dir() else [p]
    weights = [f for f in files if f.suffix in (".safetensors", ".bin", ".pth", ".pt")]
    if not weights or any(f.suffix != ".safetensors" for f in weights):
        return None
    return sum(math.prod(shape) for f in weights for shape in safetensors_shapes(str(f), f).values())


def check_weights_file(spec: str, path: Path) -> None:
    if not path.is_file():
        raise ModelNotFoundError(f"{spec}: weights file {path} does not exist")
    if path.suffix == ".safetensors":
        safetensors_shapes(spec, path)


def open_clip_weights(folder: Path) -> Path | None:
    """The weights file open_clip picks in a local-dir (its preference order), None if there is none."""
    found = [p for p in folder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".pth")]
    for name in _OPEN_CLIP_PREFERRED:
        if (folder / name) in found:
            return folder / name
    return sorted(found, key=lambda p: (p.suffix != ".safetensors", p.name))[0] if found else None


def open_clip_dir(spec: str, folder: Path) -> tuple[Path, Path]:
    """(config, weights) of an open_clip local-dir, both checked; never a directory without weights."""
    config = folder / "open_clip_config.json"
    if not config.is_file():
        raise ModelNotFoundError(
            f"{spec}: looked for {config} (an open_clip local-dir needs open_clip_config.json and a weights "
            "file such as open_clip_model.safetensors)")
    read_json(spec, config)
    weights = open_clip_weights(folder)
    if weights is None:
        raise ModelNotFoundError(
            f"{spec}: {folder} has {config.name} but no weights file (*.safetensors, *.bin, *.pth); "
            "open_clip would run a randomly initialised model")
    check_weights_file(spec, weights)
    return config, weights


def hf_location(spec: str, target: str, allow_download: bool) -> tuple[str, bool]:
    """(path or repo id, local_files_only) for an ``hf:`` target; a missing model names what was tried."""
    path = Path(target).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{spec}: directory {path} has no config.json")
        read_json(spec, path / "config.json")
        if not any(f.name.endswith(WEIGHT_SUFFIXES) for f in path.iterdir()):
            raise ModelNotFoundError(f"{spec}: {path} has config.json but no weights file "
                                     f"({', '.join('*' + s for s in WEIGHT_SUFFIXES)})")
        for weights in sorted(path.glob("*.safetensors")):
            safetensors_shapes(spec, weights)
        return str(path), True
    if allow_download:
        return target, False
    looked = [f"local directory {path.resolve()}"]
    if target.count("/") == 1 and not target.startswith((".", "/", "~")):
        from huggingface_hub import snapshot_download  # lazy: hub specs only; the plugin imports this module

        looked.append(f"Hugging Face cache entry for repo {target!r}")
        try:
            return snapshot_download(target, local_files_only=True), True
        except Exception:
            pass
    raise ModelNotFoundError(
        f"{spec}: model not found locally and downloads are off. Looked for: {'; '.join(looked)}. "
        "Pass a local directory (hf:/path/to/model) or allow downloads."
    )


def reference_target(spec: str, name: str) -> str:
    """The spec a ``reference:NAME`` stands for (open_clip local-dir or HF directory under fixtures/)."""
    if not name or "/" in name or name.startswith("."):
        raise ModelSpecError(f"{spec}: a reference name is a folder name under fixtures/")
    root = fixtures_root()
    folder = root / name
    if (folder / "open_clip_config.json").is_file():
        return f"open_clip:local-dir:{folder}"
    if (folder / "config.json").is_file():
        return f"hf:{folder}"
    available = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    raise ModelNotFoundError(
        f"{spec}: looked for {folder} holding open_clip_config.json (open_clip local-dir) or config.json "
        f"(HF model); available reference models in {root}: {available or 'none'} "
        "(train them with `faithtests train-reference`, or set FAITHTESTS_FIXTURES)"
    )


def _suggestion(spec: str, known: tuple[str, ...]) -> str:
    """A did-you-mean for an unknown spec: a near-miss prefix, or the prefix a bare name/path needs."""
    head, sep, rest = spec.partition(":")
    if sep:
        close = difflib.get_close_matches(head + ":", known, n=1, cutoff=0.6)
        return f"; did you mean {close[0] + rest!r}?" if close else ""
    path = Path(spec).expanduser()
    if "/" not in spec and (fixtures_root() / spec).is_dir():
        return f"; did you mean 'reference:{spec}'?"
    if (path / "open_clip_config.json").is_file():
        return f"; did you mean 'open_clip:local-dir:{spec}'?"
    if (path / "config.json").is_file():
        return f"; did you mean 'hf:{spec}'?"
    return ""


def _check_open_clip(spec: str, body: str) -> None:
    if not body:
        raise ModelSpecError(f"{spec}: empty open_clip spec")
    if body.startswith("local-dir:"):
        open_clip_dir(spec, Path(body.removeprefix("local-dir:")).expanduser())
        return
    if "@" not in body:
        raise ModelSpecError(
            f"{spec}: give weights as open_clip:NAME@PRETRAINED (a tag or a local file), "
            "or open_clip:local-dir:PATH; a randomly initialised model is never loaded silently")
    name, pretrained = body.split("@", 1)
    if name.endswith(".json"):
        config = Path(name).expanduser()
        if not config.is_file():
            raise ModelNotFoundError(f"{spec}: model config file {config} does not exist")
        read_json(spec, config)
    weights = Path(pretrained).expanduser()
    # a tag ("laion2b_s34b_b79k") is checked against open_clip's list at load (that needs torch)
    path_like = "/" in pretrained or pretrained.endswith(WEIGHT_SUFFIXES) or name.endswith(".json")
    if path_like or weights.exists():
        check_weights_file(spec, weights)


def check_spec(spec: str, allow_download: bool = False) -> None:
    """Raise a one-line :class:`ModelSpecError` / :class:`ModelNotFoundError` / :class:`CheckpointError`
    for a spec that cannot load, without importing torch or loading anything."""
    known = known_prefixes()
    if not isinstance(spec, str) or not spec.startswith(known):
        raise ModelSpecError(f"unknown model spec {spec!r}; it must start with one of {list(known)}"
                             + (_suggestion(spec, known) if isinstance(spec, str) else ""))
    if spec.startswith("reference:"):
        check_spec(reference_target(spec, spec.removeprefix("reference:")), allow_download)
    elif spec.startswith("vlm-scorer:"):
        check_spec(spec.removeprefix("vlm-scorer:"), allow_download)
    elif spec.startswith("open_clip:"):
        _check_open_clip(spec, spec.removeprefix("open_clip:"))
    elif spec.startswith("hf:"):
        if not spec.removeprefix("hf:"):
            raise ModelSpecError(f"{spec}: empty hf spec")
        hf_location(spec, spec.removeprefix("hf:"), allow_download)
    elif spec.startswith(PY_PREFIX):
        module, _ = py_target(spec)
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as err:
            raise ModelNotFoundError(f"{spec}: cannot import {module!r}: {err}") from None
        if found is None:
            raise ModelNotFoundError(f"{spec}: no module named {module!r} (is it installed or on sys.path?)")

