"""open_clip dual encoders as :class:`~faithtests.models.interfaces.ImageTextScorer`.

Spec forms (after the ``open_clip:`` prefix):
- ``local-dir:PATH``: open_clip's own local directory layout (``open_clip_config.json`` with ``model_cfg``
  and ``preprocess_cfg``, plus weights such as ``open_clip_model.safetensors``);
- ``NAME@FILE``: a built-in architecture (``ViT-B-32``) with a local weights file (.safetensors/.bin/.pt);
- ``CONFIG.json@FILE``: a model config file (``open_clip_config.json`` layout or a bare ``model_cfg``)
  with a weights file, for architectures open_clip does not ship;
- ``NAME@TAG``: a pretrained tag (``laion2b_s34b_b79k``). Without ``allow_download`` the tag must already
  be in the local cache (Hugging Face hub cache or ``~/.cache/clip``); nothing is fetched.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from faithtests.models.cache import checkpoint_sha256
from faithtests.models.checks import header_parameter_count, open_clip_dir
from faithtests.models.errors import CheckpointError, ModelNotFoundError, ModelSpecError
from faithtests.models.open_clip_checks import load_error, resized_pos_embeds
from faithtests.models.scorer_base import CachedDualEncoder
from faithtests.models.store import OutputStore, check_described
from faithtests.models.truncation import open_clip_lengths

if TYPE_CHECKING:
    from PIL import Image


@contextlib.contextmanager
def hub_offline(enabled: bool) -> Iterator[None]:
    """Force huggingface_hub offline while open. ``HF_HUB_OFFLINE`` is read once at import, so the
    module constant is patched (``is_offline_mode()`` reads it at call time)."""
    if not enabled:
        yield
        return
    from huggingface_hub import constants  # lazy: a warm run (module doc) imports no hub

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved


def _cached_tag_file(cfg: dict[str, Any], cache_dir: str | None) -> tuple[Path | None, list[str]]:
    """Locate a pretrained tag's weights in the local caches without any network access."""
    looked: list[str] = []
    hub = str(cfg.get("hf_hub", ""))
    if hub:
        from huggingface_hub import try_to_load_from_cache  # lazy: only to load

        model_id, filename = os.path.split(hub)
        names = [filename] if filename else []
        names += ["open_clip_model.safetensors", "open_clip_pytorch_model.safetensors",
                  "open_clip_pytorch_model.bin"]
        for name in dict.fromkeys(names):
            looked.append(f"hf-hub cache {model_id}/{name}")
            found = try_to_load_from_cache(model_id, name, cache_dir=cache_dir)
            if isinstance(found, str) and os.path.isfile(found):
                return Path(found), looked
    url = str(cfg.get("url", ""))
    if url:
        candidate = Path(cache_dir or os.path.expanduser("~/.cache/clip")) / os.path.basename(url)
        looked.append(str(candidate))
        if candidate.is_file():
            return candidate, looked
    return None, looked


def _config_dir_for(config_path: Path, weights: Path, workdir: Path) -> Path:
    """An open_clip local-dir (config + weights link) for a config file and a separate weights file."""
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    wrapped = raw if "model_cfg" in raw else {"model_cfg": raw, "preprocess_cfg": {}}
    (workdir / "open_clip_config.json").write_text(json.dumps(wrapped), encoding="utf-8")
    (workdir / f"open_clip_model{weights.suffix}").symlink_to(weights.resolve())
    return workdir


def _resized_error(spec: str, weights: str, config: str, resized: list[str]) -> str:
    return (f"{spec}: the weights {weights} do not match the sizes in {config}: {'; '.join(resized)} "
            "(open_clip would interpolate them; fix the config's image_size / context_length, or allow "
            "it with FAITHTESTS_RESIZE_POS_EMBED=1)")


@dataclass
class _Loaded:
    model: Any
    preprocess: Any
    tokenizer: Any
    trim_text: bool


class OpenClipScorer(CachedDualEncoder):
    """An open_clip model + its preprocess transform + tokenizer behind the scorer protocol.

    A ``local-dir:`` checkpoint whose description the run's ``--faith-cache`` store holds (``defer_to``:
    it loaded before with these settings, :meth:`OutputStore.describe`) is loaded on the first encode the
    store cannot answer, so a warm re-run never imports open_clip (and torchvision under it)."""

    def __init__(
        self,
        spec: str,
        body: str,
        *,
        device: torch.device,
        dtype: torch.dtype,
        batch_size: int = 16,
        allow_download: bool = False,
        cache_dir: str | None = None,
        resize_pos_embed: bool = False,
        defer_to: OutputStore | None = None,
    ) -> None:
        self._body, self._allow_download, self._cache_dir = body, allow_download, cache_dir
        self._resize = resize_pos_embed
        self._heavy: _Loaded | None = None
        described: dict[str, Any] | None = None
        if defer_to is not None and body.startswith("local-dir:"):
            path = Path(body.removeprefix("local-dir:")).expanduser()
            open_clip_dir(spec, path)  # the files are there and whole
            self._weights, self._files, self._identity = [path], [path], ""
            if header_parameter_count(self._weights) is not None:  # sized without loading
                described = defer_to.description(self.namespace_for(self._files, dtype, device))
        if described is None:
            described, self._heavy = self._load_open_clip(spec, device, dtype)
        elif described["resized"] and not resize_pos_embed:  # the check a load makes, made on the record
            raise CheckpointError(_resized_error(spec, str(self._weights[0]), "its open_clip_config.json",
                                                 described["resized"]))
        self._description = described
        meta: dict[str, Any] = {"family": described["family"],
                                "checkpoint_sha256": checkpoint_sha256(self._weights)}
        if described["resized"]:  # allowed explicitly: the fingerprint says the embeddings are not trained
            meta["pos_embed_resized"] = described["resized"]
        files = self._files
        super().__init__(spec, device=device, dtype=dtype, batch_size=batch_size, meta=meta)
        self._files = files  # (the base class starts with none)
        if described["limit"] is not None:
            self.truncation.limit = int(described["limit"])

    def _load_open_clip(self, spec: str, device: torch.device,
                        dtype: torch.dtype) -> tuple[dict[str, Any], _Loaded]:
        """Build the model, its transform and tokenizer; what the adapter reads off them, and them."""
        import open_clip  # lazy: a warm run never imports open_clip (class doc)

        body, cache_dir = self._body, self._cache_dir
        files: list[Path] = []
        weights: Path | None
        with contextlib.ExitStack() as stack:
            stack.enter_context(hub_offline(not self._allow_download))
            if body.startswith("local-dir:"):
                path = Path(body.removeprefix("local-dir:")).expanduser()
                config, weights = open_clip_dir(spec, path)  # never a local-dir without weights
                name, files, described = f"local-dir:{path}", [path], str(config)
                create_kwargs: dict[str, Any] = {}
            else:
                name, create_kwargs, files = self._resolve_named(spec, body, self._allow_download, cache_dir,
                                                                 stack)
                weights = files[0] if files else None
                config_json = body.split("@", 1)[0]
                described = (config_json if config_json.endswith(".json")
                             else f"open_clip's built-in {name} config")
            try:
                model, _, preprocess = open_clip.create_model_and_transforms(
                    name, device=device, cache_dir=cache_dir, **create_kwargs
                )
                tokenizer = open_clip.get_tokenizer(name.split("@")[0], cache_dir=cache_dir)
            except Exception as err:
                mapped = load_error(spec, described, weights, err)
                if mapped is None:
                    raise
                raise mapped from err
        resized = resized_pos_embeds(model, weights) if weights is not None else []
        if resized and not self._resize:
            raise CheckpointError(_resized_error(spec, str(weights), described, resized))
        model = model.to(device=device, dtype=dtype).eval()
        loaded = _Loaded(model, preprocess, tokenizer, _trimmable_text_tower(model))
        self._lengths = open_clip_lengths(tokenizer)
        # What names the outputs besides the files: the architecture and preprocessing of a named model.
        config_json = body.split("@", 1)[0]
        is_json = config_json.endswith(".json") and not body.startswith("local-dir:")
        self._weights = files
        self._files = files + ([Path(config_json).expanduser()] if is_json else [])
        self._identity = "" if name.startswith("local-dir:") else repr(
            (name, sorted((k, str(v)) for k, v in create_kwargs.items() if k != "pretrained")))
        # A sigmoid-loss model (SigLIP) carries a learned logit bias; its similarity scale differs from
        # CLIP's, and the thresholds have a "siglip" family for it.
        family = "siglip" if getattr(model, "logit_bias", None) is not None else "clip"
        limit = int(getattr(tokenizer, "context_length", 0) or 77) if self._lengths is not None else None
        return {"family": family, "resized": resized, "limit": limit}, loaded

    def _loaded(self) -> _Loaded:
        if self._heavy is None:
            described, loaded = self._load_open_clip(self.spec, self.device, self.dtype)
            # a mismatch keeps the model unloaded, so every later call fails the same way
            check_described(self.spec, described, self._description)
            self._heavy = loaded
        return self._heavy

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (False while a warm cache has answered every encode)."""
        return self._heavy is not None

    @property
    def model(self) -> Any:
        return self._loaded().model

    @property
    def preprocess(self) -> Any:
        return self._loaded().preprocess

    @property
    def tokenizer(self) -> Any:
        return self._loaded().tokenizer

    def use_store(self, store: OutputStore, options: dict[str, Any] | None = None) -> None:
        super().use_store(store, options)
        if self._heavy is not None and not options:  # the description a later run defers on
            store.describe(self.store_namespace, self._description)

    def num_parameters(self) -> int | None:
        """Parameter count (the thread policy's model size): from the safetensors header when there is
        one (loaded or not, so a deferred model is sized as a loaded one), else counted on the module."""
        counted = header_parameter_count(self._weights)
        if counted is None:
            counted = int(sum(p.numel() for p in self._loaded().model.parameters()))
        return counted

    def _token_lengths(self, texts: list[str]) -> list[int]:
        self._loaded()
        assert self._lengths is not None  # a limit is set only when the tokenizer's lengths are known
        return self._lengths(texts)

    def _store_identity(self) -> str:
        return f"open_clip {version('open_clip_torch')} {self._identity}"

    @staticmethod
    def _resolve_named(
        spec: str, body: str, allow_download: bool, cache_dir: str | None, stack: contextlib.ExitStack
    ) -> tuple[str, dict[str, Any], list[Path]]:
        import open_clip  # lazy: only to load (class doc)

        if "@" not in body:
            raise ModelSpecError(
                f"{spec}: give weights as open_clip:NAME@PRETRAINED (a tag or a local file), "
                "or open_clip:local-dir:PATH; a randomly initialised model is never loaded silently"
            )
        name, pretrained = body.split("@", 1)
        weights = Path(pretrained).expanduser()
        config_file = Path(name).expanduser()
        if name.endswith(".json"):
            if not config_file.is_file():
                raise ModelNotFoundError(f"{spec}: model config file {config_file} does not exist")
            if not weights.is_file():
                raise ModelNotFoundError(f"{spec}: weights file {weights} does not exist")
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="faith_oc_")))
            return f"local-dir:{_config_dir_for(config_file, weights, workdir)}", {}, [weights]
        if name not in open_clip.list_models():
            raise ModelNotFoundError(
                f"{spec}: {name!r} is not an open_clip architecture (see open_clip.list_models()); "
                "for a custom architecture pass open_clip:CONFIG.json@WEIGHTS or open_clip:local-dir:PATH"
            )
        if weights.is_file():
            return name, {"pretrained": str(weights)}, [weights]
        tag_cfg = open_clip.get_pretrained_cfg(name, pretrained)
        if not tag_cfg:
            raise ModelNotFoundError(
                f"{spec}: {pretrained!r} is neither a file nor a pretrained tag of {name} "
                f"(tags: {open_clip.list_pretrained_tags_by_model(name)})"
            )
        if allow_download:
            return name, {"pretrained": pretrained}, []
        found, looked = _cached_tag_file(tag_cfg, cache_dir)
        if found is None:
            raise ModelNotFoundError(
                f"{spec}: pretrained tag {pretrained!r} is not in the local cache and downloads are off. "
                f"Looked for: {'; '.join(looked)}. Pass a local file instead "
                f"(open_clip:{name}@/path/to/weights.safetensors) or allow downloads."
            )
        keys = ("mean", "std", "interpolation", "resize_mode")
        kwargs: dict[str, Any] = {
            "pretrained": str(found),
            "force_preprocess_cfg": {k: tag_cfg[k] for k in keys if k in tag_cfg},
            "force_quick_gelu": bool(tag_cfg.get("quick_gelu", False)),
        }
        return name, kwargs, [found]

    def _encode_image_batch(self, images: list[Image.Image]) -> torch.Tensor:
        oc = self._loaded()
        pixels = torch.stack([oc.preprocess(im.convert("RGB")) for im in images])
        return oc.model.encode_image(pixels.to(device=self.device, dtype=self.dtype))  # type: ignore[no-any-return]

    def _encode_text_batch(self, texts: list[str]) -> torch.Tensor:
        oc = self._loaded()
        tokens = oc.tokenizer(texts).to(self.device)
        if oc.trim_text:
            return _encode_text_trimmed(oc.model, tokens)
        return oc.model.encode_text(tokens)  # type: ignore[no-any-return]


def _trimmable_text_tower(model: Any) -> bool:
    """True for open_clip's built-in CLIP text tower with a causal mask and EOT (argmax) pooling."""
    import open_clip  # lazy: only once loaded (class doc)

    mask = getattr(model, "attn_mask", None)
    if not isinstance(model, open_clip.CLIP) or getattr(model, "text_pool_type", None) != "argmax":
        return False
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2:
        return False
    causal = torch.triu(torch.ones_like(mask, dtype=torch.bool), diagonal=1)
    return bool(torch.equal(torch.isinf(mask) & (mask < 0), causal))


def _encode_text_trimmed(model: Any, tokens: torch.Tensor) -> torch.Tensor:
    """``CLIP.encode_text`` on the first L columns only, L = last EOT position in the batch + 1.

    Exact, not an approximation: under the causal mask no position after a row's EOT token reaches
    that row's EOT features, which are all that argmax pooling keeps; the padding to the context length
    (77 for CLIP, ~15 tokens used by a COCO caption) is pure waste.
    """
    from open_clip.transformer import text_global_pool  # lazy: only once loaded (class doc)

    length = int(tokens.argmax(dim=-1).max()) + 1
    t = tokens[:, :length]
    cast = model.transformer.get_cast_dtype()
    x = model.token_embedding(t).to(cast) + model.positional_embedding[:length].to(cast)
    x = model.transformer(x, attn_mask=model.attn_mask[:length, :length])
    x = text_global_pool(model.ln_final(x), t, "argmax")
    proj = model.text_projection
    if proj is not None:
        x = proj(x) if isinstance(proj, torch.nn.Linear) else x @ proj
    assert isinstance(x, torch.Tensor)
    return x
