"""Encode once: each distinct image, clip and soundtrack goes through its tower once per loaded model.

The suites ask many questions of one image (several prompts, both option orders, shuffles, a prefix
call and then a generation), and before this every question sent the image through the vision tower
again: 2.7x per image on the default run's reference VLM, 10.8x per soundtrack on the omni one
(``benchmarks/results/work_default_run.json``). In transformers 5, ``forward`` and ``generate`` both
run the towers through the model's ``get_image_features`` / ``get_video_features`` /
``get_audio_features``. :func:`encode_once` replaces those methods on the loaded instance with a memo:

- A call's inputs are split into items, one per image, clip or soundtrack, by the layout the family
  uses. There are three:
  - *rows*: LLaVA's ``pixel_values`` [N, C, H, W], with ``image_sizes`` [N, 2] if given;
  - *grid*: Qwen-VL / Qwen-Omni's ``pixel_values(_videos)`` [sum of t*h*w, D] with ``*_grid_thw``
    [N, 3];
  - *soundtracks*: Qwen-Omni's ``input_features`` [N, mel, T] with ``feature_attention_mask`` [N, T].
- Each item is keyed by its bytes and the call's settings (e.g. ``vision_feature_layer``).
- An item not seen before is encoded *alone*, in a batch of one. Its features then do not depend on
  what else was in the batch, so a run's results do not depend on test order, ``-k``, sharding or
  xdist. The call's output is assembled from the memo in the call's order.
- The memo is an LRU of at most :data:`BUDGET_BYTES` per model, kept on the model's device.

Anything else goes to the tower unchanged, as before, and :attr:`EncoderMemo.fallback` says why, once
per modality:
- a layout not listed above (tiles with per-tile masks, another per-item tensor);
- a tuple output asked for;
- an output whose item count is not the input's.

Float noise: a batch of one can differ from the same image inside a batch in its last float32 bits.
That is within the float-noise rule (``faithtests.scorecard.float_noise``): every verdict is the same.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any
from weakref import WeakKeyDictionary

import torch

from faithtests.models.work import GRID, count_encoded, tower_inputs

#: The most bytes of features one model's memo keeps (least recently used dropped first). A LLaVA-1.5
#: image is 576 x 4096 fp16 = 4.7 MB, so about 200 images; the reference models' are ~18 KB.
BUDGET_BYTES = 1 << 30
#: modality -> the method a transformers 5 model runs that tower through (forward and generate alike)
METHODS = {"image": "get_image_features", "video": "get_video_features", "audio": "get_audio_features"}
#: arguments the forward hands on that do not change the features (left out of an item's key)
NOT_FEATURES = frozenset({"use_cache", "return_dict", "output_attentions", "output_hidden_states", "cache",
                          "past_key_values", "cache_position"})
#: modality -> the fields of its tower's output a memo can keep per item and assemble again
KEPT = {"image": ("pooler_output", "deepstack_features"), "video": ("pooler_output", "deepstack_features"),
        "audio": ("last_hidden_state",)}
_MEMOS: WeakKeyDictionary[Any, EncoderMemo] = WeakKeyDictionary()
#: one item's kept fields: a tensor per field, a list field (deepstack: one per layer) flattened
Features = tuple[torch.Tensor, ...]


@dataclass
class EncoderMemo:
    """One model's memo (module doc): features by item key, and what went through each tower."""

    budget: int = BUDGET_BYTES
    entries: OrderedDict[str, Features] = field(default_factory=OrderedDict)
    size: int = 0  # bytes held
    encoded: dict[str, int] = field(default_factory=dict)  # modality -> items through its tower
    reused: dict[str, int] = field(default_factory=dict)  # modality -> items answered from the memo
    fallback: dict[str, str] = field(default_factory=dict)  # modality -> why its calls are not memoised
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # modality -> the fields kept per item
    kinds: dict[str, type] = field(default_factory=dict)  # modality -> the output class the tower returns
    shapes: dict[str, dict[str, str]] = field(default_factory=dict)  # modality -> field -> list/tensor/none
    patched: list[tuple[Any, str]] = field(default_factory=list)  # (module, method name) replaced

    def counts(self) -> dict[str, int]:
        """``images_encoded`` ... : items each wrapped tower encoded (the floor is one per distinct)."""
        return {f"{_plural(m)}_encoded": n for m, n in self.encoded.items()}

    def get(self, key: str) -> Features | None:
        hit = self.entries.get(key)
        if hit is not None:
            self.entries.move_to_end(key)
        return hit

    def put(self, key: str, value: Features) -> None:
        self.entries[key] = value
        self.size += _nbytes(value)
        while self.size > self.budget and len(self.entries) > 1:
            _, old = self.entries.popitem(last=False)
            self.size -= _nbytes(old)


def _nbytes(features: Features) -> int:
    return sum(t.numel() * t.element_size() for t in features)


def _plural(modality: str) -> str:
    return {"image": "images", "video": "videos", "audio": "audio"}[modality]


def encode_once(model: Any, budget: int = BUDGET_BYTES) -> EncoderMemo:
    """Memoise ``model``'s tower methods (module doc). The methods live on the module whose ``forward``
    calls them: the base model where it defines them (LLaVA's ``LlavaModel``), else the model itself (a
    Qwen-Omni thinker); ``generate`` reaches the same instance through ``base_model``. A tower whose
    features the forward reads in a field the memo does not keep is counted, not memoised (``fallback``)."""
    memo = EncoderMemo(budget=budget)
    base = getattr(model, "base_model", model)
    for modality, name in METHODS.items():
        owner = base if _defines(base, name) else model if _defines(model, name) else None
        if owner is None:  # a family without the modality; or one whose forward runs its tower inline
            if modality == "image":
                memo.fallback[modality] = f"{type(model).__name__} has no {name} (its forward runs the tower)"
            continue
        memo.encoded[modality] = 0
        memo.reused[modality] = 0
        reads = forward_reads(type(owner), modality)
        if isinstance(reads, str):
            memo.fallback[modality] = reads
        else:
            memo.reads[modality] = reads
        setattr(owner, name, _memoised(memo, modality, getattr(owner, name)))
        memo.patched.append((owner, name))
    _MEMOS[model] = memo
    count_encoded(model, memo.counts)
    return memo


def memo_of(model: Any) -> EncoderMemo | None:
    return _MEMOS.get(model)


def unmemoise(model: Any) -> None:
    """Back to the family's own tower methods on ``model`` (the memo's instance attributes removed):
    what a comparison with and without the memo runs against."""
    memo = _MEMOS.pop(model, None)
    count_encoded(model, None)
    for owner, name in memo.patched if memo is not None else ():
        owner.__dict__.pop(name, None)


def _defines(module: Any, name: str) -> bool:
    return callable(getattr(type(module), name, None))


def forward_reads(cls: Any, modality: str) -> tuple[str, ...] | str:
    """The fields of ``modality``'s features that ``cls.forward`` reads, from its source (transformers
    5 reads ``mm_encoder_outputs["image"].pooler_output``; Qwen3-VL also ``.deepstack_features``; the
    Qwen-Omni thinkers ``get_audio_features(...).last_hidden_state``); why not, where it reads another
    field or none that can be found."""
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return f"{cls.__name__}.forward has no source to read"
    if modality == "audio":
        found = set(re.findall(r"get_audio_features\([^()]*\)\s*\.(\w+)", source))
    else:
        found = set(re.findall(rf'mm_encoder_outputs\["{modality}"\]\.(\w+)', source))
    if not found:
        return f"{cls.__name__}.forward reads its {modality} features in a way encode_once does not follow"
    if extra := sorted(found - set(KEPT[modality])):
        return f"{cls.__name__}.forward reads {', '.join(extra)} of its {modality} features"
    return tuple(f for f in KEPT[modality] if f in found)


def _memoised(memo: EncoderMemo, modality: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)
    var_kw = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(original)  # generate reads the signature to pick the method's arguments
    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        given = dict(bound.arguments)
        if var_kw is not None:
            given.update(given.pop(var_kw, {}) or {})
        split = memo.fallback.get(modality) or _split(modality, given)
        features = split if isinstance(split, str) else _features(memo, modality, original, split)
        if isinstance(split, str) or isinstance(features, str):  # later calls of this tower go whole too
            memo.fallback.setdefault(modality, str(features))
            memo.encoded[modality] += tower_inputs(modality, given)
            return original(*args, **kwargs)
        return _assemble(memo.kinds[modality], memo.reads[modality], memo.shapes[modality], features)

    return call


def _features(memo: EncoderMemo, modality: str, original: Callable[..., Any],
              split: Split) -> list[Features] | str:
    """Each item's kept fields, from the memo or encoded alone; why not, when the tower's output for
    one item does not have them (the call then goes whole)."""
    items, settings, encode_alone = split
    out: list[Features] = []
    for item in items:
        key = _key(modality, settings, item)
        hit = memo.get(key)
        if hit is None:
            raw = encode_alone(original, item, settings)
            fresh = _kept(raw, memo.reads[modality], memo.shapes.setdefault(modality, {}))
            if isinstance(fresh, str):
                return fresh
            memo.kinds.setdefault(modality, type(raw))
            memo.encoded[modality] += 1
            memo.put(key, fresh)
            hit = fresh
        else:
            memo.reused[modality] += 1
        out.append(hit)
    return out


def _kept(out: Any, reads: tuple[str, ...], shapes: dict[str, str]) -> Features | str:
    """One item's fields, and (in ``shapes``) how the family gives each: ``pooler_output`` as a list
    with the item's one tensor or as a tensor with a first axis of one; ``deepstack_features`` as one
    tensor per layer, or None; ``last_hidden_state`` as the item's tensor."""
    kept: list[torch.Tensor] = []
    for name in reads:
        value = getattr(out, name, None)
        if name == "pooler_output":
            if isinstance(value, torch.Tensor) and value.shape[0] == 1:
                shapes[name], value = "tensor", value[0]
            elif isinstance(value, (list, tuple)) and len(value) == 1:
                shapes[name], value = "list", value[0]
            else:
                return "the tower's pooler_output is not one tensor per item"
        elif name == "deepstack_features":  # per layer: the item's tensor, or a split of one tensor
            if value is None:  # a config without deepstack layers
                shapes[name] = "none"
                continue
            value = _layers(value, shapes)
        parts = list(value) if isinstance(value, (list, tuple)) else [value]
        tensors = [t for t in parts if isinstance(t, torch.Tensor)]
        if not parts or len(tensors) != len(parts):
            return f"the tower's {name} is not tensors"
        kept += tensors
    return tuple(kept)


def _layers(value: Any, shapes: dict[str, str]) -> list[Any]:
    """Deepstack layers of one item: Qwen3-VL splits each layer per image (a tuple of one)."""
    layers = list(value) if isinstance(value, (list, tuple)) else [value]
    split = all(isinstance(x, (list, tuple)) and len(x) == 1 for x in layers)
    shapes["deepstack_features"] = "split" if split else "tensor"
    return [x[0] for x in layers] if split else layers


def _assemble(kind: type, reads: tuple[str, ...], shapes: dict[str, str], items: list[Features]) -> Any:
    """The call's output from its items' fields, in the call's order, as the family's class gives it."""
    fields: dict[str, Any] = {}
    for name in reads:
        if name == "pooler_output":
            pooled = [f[0] for f in items]
            fields[name] = torch.stack(pooled) if shapes[name] == "tensor" else pooled
        elif name == "deepstack_features":  # the fields after pooler_output: one per layer
            layers = range(len(items[0]) - 1)
            shape = shapes.get(name)
            per_layer = [[f[1 + j] for f in items] for j in layers]
            fields[name] = (None if shape == "none" else
                            per_layer if shape == "split" else [torch.cat(p) for p in per_layer])
        else:
            fields[name] = torch.cat([f[0] for f in items])
    try:
        return kind(**fields)
    except TypeError:  # a class that requires fields the forward never reads (Gemma 3n's timm output)
        return SimpleNamespace(**fields)


Item = tuple[torch.Tensor, ...]
Settings = dict[str, Any]
#: (items, the call's other arguments, how to run the tower on one item alone)
Split = tuple[list[Item], Settings, Callable[[Callable[..., Any], Item, Settings], Any]]


def _split(modality: str, given: dict[str, Any]) -> Split | str:
    """The call's items and how to encode one alone, or why the layout is not one of the three."""
    if given.get("return_dict") is False:
        return "a tuple output was asked for"
    tensors = {k for k, v in given.items() if isinstance(v, torch.Tensor)}
    # None is each argument's default: left out, so an item is encoded with only what the call set
    settings = {k: v for k, v in given.items() if k not in tensors and k != "return_dict" and v is not None}
    if modality == "audio":
        return _soundtracks(given, tensors, settings)
    pixels_name, grid_name = GRID[modality]
    if grid_name in tensors and tensors <= {pixels_name, grid_name}:
        return _grid(given[pixels_name], given[grid_name], pixels_name, grid_name, settings)
    if modality == "image" and tensors <= {"pixel_values", "image_sizes"} and "pixel_values" in tensors:
        return _rows(given["pixel_values"], given.get("image_sizes"), settings)
    return f"inputs {sorted(tensors)} are not a layout encode_once splits (rows, grid, soundtracks)"


def _rows(pixels: torch.Tensor, sizes: torch.Tensor | None, settings: Settings) -> Split:
    items: list[Item] = [(pixels[i],) if sizes is None else (pixels[i], sizes[i])
                         for i in range(pixels.shape[0])]

    def alone(original: Callable[..., Any], item: Item, settings: Settings) -> Any:
        extra = {} if len(item) == 1 else {"image_sizes": item[1][None]}
        return original(pixel_values=item[0][None], return_dict=True, **settings, **extra)

    return items, settings, alone


def _grid(pixels: torch.Tensor, grid: torch.Tensor, pixels_name: str, grid_name: str,
          settings: Settings) -> Split:
    sizes = grid.prod(-1).tolist()
    starts = [0, *torch.tensor(sizes).cumsum(0).tolist()]
    items: list[Item] = [(pixels[starts[i]:starts[i + 1]], grid[i]) for i in range(grid.shape[0])]

    def alone(original: Callable[..., Any], item: Item, settings: Settings) -> Any:
        return original(**{pixels_name: item[0], grid_name: item[1][None]}, return_dict=True, **settings)

    return items, settings, alone


def _soundtracks(given: dict[str, Any], tensors: set[str], settings: Settings) -> Split | str:
    features, mask = given.get("input_features"), given.get("feature_attention_mask")
    if features is None or mask is None or tensors != {"input_features", "feature_attention_mask"}:
        return f"audio inputs {sorted(tensors)} are not padded soundtracks with their attention mask"
    valid = mask.bool()
    items: list[Item] = [(features[i][:, valid[i]],) for i in range(features.shape[0])]

    def alone(original: Callable[..., Any], item: Item, settings: Settings) -> Any:
        ones = torch.ones(1, item[0].shape[-1], dtype=mask.dtype, device=mask.device)
        return original(input_features=item[0][None], feature_attention_mask=ones, return_dict=True,
                        **settings)

    return items, settings, alone


def _key(modality: str, settings: Settings, item: Sequence[torch.Tensor]) -> str:
    kept = sorted((k, v) for k, v in settings.items() if k not in NOT_FEATURES)
    h = hashlib.blake2b(f"{modality}|{kept!r}".encode(), digest_size=20)
    for t in item:
        host = t.detach().contiguous().cpu()
        h.update(f"{host.dtype}{tuple(host.shape)}".encode())
        h.update(host.view(torch.uint8).numpy().tobytes() if host.numel() else b"")
    return h.hexdigest()
