"""A persistent store of model outputs (``--faith-cache DIR``), so a re-run redoes no forward pass.

One SQLite file per directory (``outputs.sqlite3``, WAL mode: xdist workers read and write it at the
same time). A row is ``(namespace, key) -> value``:

- the *namespace* is :func:`model_namespace`: a digest of everything that decides a model's numbers —
  the checkpoint files' sha256, the adapter class, dtype, device type, library versions and adapter
  options — plus the output kind (``"image"``, ``"decide"``, ...) and, for VLM calls, the hooks'
  :func:`hooks_key`. Changed weights, dtype, device or hooks are a different namespace: a miss.
- the *key* is the content digest of one input row (image pixels, prompt text, caption...).
- the *value* is one row of output: an array (dtype, shape and raw bytes: :func:`encode_array`; no
  pickle), or UTF-8 text.

Outputs are stored per row, so a run that asks for a superset of an earlier run's inputs computes only
the new rows. A model whose weights cannot be hashed (no weight files found) gets no namespace and is
never stored: a cache hit must be exactly what the model would compute.

Without ``--faith-cache`` a run still keeps its outputs for its own session (``OutputStore(None)``:
SQLite's private temporary database, in memory, spilling to a temporary file deleted on close): suites
ask the same model the same question in several tests (a variant's base rows, a forced choice's orders
shared with a probe), and a row computed once is served again. Served rows are the bytes a warm run
reads, so results are unchanged (a cold ``--faith-cache`` run and a run without it: ``faithtests
compare --all``, 0 changed).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

if TYPE_CHECKING:
    from faithtests.models.interfaces import Hooks

#: Bump when a value's encoding or a key's meaning changes: every old row becomes a miss.
FORMAT_VERSION = 2
DB_NAME = "outputs.sqlite3"

V = TypeVar("V")


def digest(parts: object) -> str:
    """sha256 of a JSON-serialisable description (keys sorted, so dict order never matters)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def model_namespace(
    checkpoint_sha256: Mapping[str, str] | None,
    adapter: str,
    dtype: torch.dtype,
    device: torch.device,
    options: Mapping[str, Any] | None = None,
) -> str | None:
    """Namespace of one loaded model's outputs, or None when its weights were not hashed."""
    if not checkpoint_sha256:
        return None
    try:  # the installed version, without importing transformers (seconds) for an open_clip model
        transformers_version = version("transformers")
    except PackageNotFoundError:
        transformers_version = "absent"
    return digest({
        "format": FORMAT_VERSION,
        "weights": dict(checkpoint_sha256),
        "adapter": adapter,
        "dtype": str(dtype),
        "device": device.type,  # numerics differ between CPU and CUDA kernels, not between cuda:0 and :1
        "torch": torch.__version__,
        "transformers": transformers_version,
        "options": dict(options or {}),
    })


def hooks_key(hooks: Hooks | None) -> str | None:
    """What the stored outputs of a call under ``hooks`` depend on; None when they cannot be keyed.

    Attention and FFN modifiers are code, not data: they are keyed by ``hooks.tag`` (which must name them
    and their parameters) and a call with modifiers but no tag is never stored. MLP scales are data. A
    contrast is keyed by its ``tag`` (how the auxiliary prompts were built; none: never stored) and eta;
    the adapter adds each row's auxiliary prompt to that row's key. The logit adjuster is not part of the
    key: adapters store the logits before it and apply it after. Hooks without FFN modifiers or contrast
    keep the key they had before those existed (stored rows stay valid).
    """
    if hooks is None or not (hooks.attention or hooks.mlp_scale or hooks.ffn or hooks.contrast):
        return "none"  # no hooks, or only a logit adjuster: the stored outputs are the plain model's
    code = bool(hooks.attention or hooks.ffn)
    if code and not hooks.tag:
        return None
    if hooks.contrast is not None and not hooks.contrast.tag:
        return None
    parts: dict[str, Any] = {"tag": hooks.tag if code else None,
                             "attention_layers": sorted(hooks.attention),
                             "mlp_scale": sorted(hooks.mlp_scale.items())}
    if hooks.ffn:
        parts["ffn_layers"] = sorted(hooks.ffn)
    if hooks.contrast is not None:
        parts["contrast"] = {"tag": hooks.contrast.tag, "eta": float(hooks.contrast.eta)}
    return digest(parts)


#: Array rows: ``_MAGIC``, a 2-byte little-endian header length, an ASCII header ``"<f4;3,4"`` (dtype,
#: shape), then the raw bytes. Nine times faster to read back than ``np.save`` / ``np.load`` per row,
#: which dominated a warm run's reads; still no pickle.
_MAGIC = b"FTA1"
_ARRAY_DTYPES = frozenset({"<f2", "<f4", "<f8", "<i8", "<i4", "|b1", "|u1"})


def encode_array(value: np.ndarray[Any, Any] | torch.Tensor) -> bytes:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:  # numpy has no bfloat16
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)  # (np.ascontiguousarray would make a 0-d array 1-d)
    dtype = array.dtype.newbyteorder("<").str if array.dtype.byteorder == ">" else array.dtype.str
    if dtype not in _ARRAY_DTYPES:
        raise TypeError(f"store: cannot encode an array of dtype {array.dtype}")
    header = f"{dtype};{','.join(str(n) for n in array.shape)}".encode("ascii")
    body = array.astype(dtype, copy=False).tobytes(order="C")
    return _MAGIC + len(header).to_bytes(2, "little") + header + body


def decode_array(blob: bytes) -> torch.Tensor:
    if blob[:4] != _MAGIC:
        raise ValueError("store: not an array row (bad magic); delete the cache directory to start afresh")
    size = int.from_bytes(blob[4:6], "little")
    dtype, _, dims = blob[6 : 6 + size].decode("ascii").partition(";")
    if dtype not in _ARRAY_DTYPES:
        raise ValueError(f"store: unknown dtype {dtype!r} in an array row")
    shape = tuple(int(n) for n in dims.split(",")) if dims else ()
    array = np.frombuffer(bytearray(blob[6 + size :]), dtype=dtype).reshape(shape)  # writable copy
    return torch.from_numpy(array)


def check_described(spec: str, found: Mapping[str, Any], described: Mapping[str, Any] | None) -> None:
    """A deferred adapter's model, once loaded, must be the one its stored description (``described``,
    None for an adapter loaded at once) says: else the stored rows would answer for another model."""
    if described is not None and dict(found) != dict(described):
        raise RuntimeError(f"{spec}: the loaded model is not the one the output cache describes "
                           f"({dict(found)} vs {dict(described)}); delete the cache directory")


@dataclass
class StoreStats:
    """Rows served from disk (``hits``), computed and written (``writes``), and rows that could not be
    keyed (``uncacheable``: attention hooks without a tag, or weights that could not be hashed)."""

    hits: int = 0
    writes: int = 0
    uncacheable: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "writes": self.writes, "uncacheable": self.uncacheable}


class OutputStore:
    """``get``/``put`` of row values under (namespace, key) in ``DIR/outputs.sqlite3``; with
    ``root=None``, in a private temporary database for this process's session only (:attr:`persistent`
    False)."""

    def __init__(self, root: str | Path | None) -> None:
        self.persistent = root is not None
        self.root = Path(root).expanduser() if root is not None else Path()
        try:
            if self.persistent:
                self.root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise OSError(f"--faith-cache: cannot create cache directory {self.root}: {err}") from err
        self.path = self.root / DB_NAME if self.persistent else Path("(session store)")
        self._stats: dict[str, StoreStats] = {}  # per owner: a model's namespace
        self._lock = threading.Lock()
        # "": SQLite's private temporary database, in memory until its page cache fills, then spilled
        # to a temporary file deleted on close (a real model's states would not fit in memory)
        where = str(self.path) if self.persistent else ""
        self._db = sqlite3.connect(where, timeout=60.0, check_same_thread=False)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS outputs (ns TEXT NOT NULL, key TEXT NOT NULL,"
                " value BLOB NOT NULL, PRIMARY KEY (ns, key)) WITHOUT ROWID"
            )
            self._db.commit()
        except sqlite3.DatabaseError as err:
            raise self._unusable(err) from err

    def _unusable(self, err: sqlite3.DatabaseError) -> sqlite3.DatabaseError:
        """The error to raise for ``err``: a damaged file (garbage, or a valid header over malformed pages,
        found only when a read reaches them) is named with the advice to delete it; an operational
        failure (locked, disk full) is named with the path only: deleting would not help."""
        if isinstance(err, sqlite3.OperationalError):
            return sqlite3.OperationalError(f"--faith-cache: {self.path}: {err}")
        return sqlite3.DatabaseError(
            f"--faith-cache: {self.path} is not a usable cache ({err}); delete it to start afresh")

    def get(self, namespace: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored values among ``keys`` (absent keys are simply missing from the result)."""
        found: dict[str, bytes] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock, self._named():
            for start in range(0, len(unique), 500):  # SQLite's bound-parameter limit
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM outputs WHERE ns = ? AND key IN ({marks})", [namespace, *chunk]
                )
                found.update((str(k), bytes(v)) for k, v in rows)
        return found

    @contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as err:
            raise self._unusable(err) from err

    def put(self, namespace: str, items: Mapping[str, bytes]) -> None:
        with self._lock, self._named():
            self._db.executemany(
                "INSERT OR REPLACE INTO outputs (ns, key, value) VALUES (?, ?, ?)",
                [(namespace, k, v) for k, v in items.items()],
            )
            self._db.commit()

    def description(self, owner: str | None) -> dict[str, Any] | None:
        """What an adapter stored about its model under ``owner`` (its namespace) when it last loaded it
        (:meth:`describe`), or None: an adapter defers loading only when this is found."""
        if not owner:
            return None
        found = self.get(f"{owner}|meta", ["model"]).get("model")
        return dict(json.loads(found)) if found is not None else None

    def describe(self, owner: str | None, description: Mapping[str, Any]) -> None:
        """Store what a loaded adapter read off its model (layers, context length...) under ``owner``."""
        if owner:
            self.put(f"{owner}|meta", {"model": json.dumps(dict(description), sort_keys=True).encode()})

    def stats(self, owner: str | None) -> StoreStats:
        """The counters of one model (its namespace; None: a model whose weights were not hashed)."""
        return self._stats.setdefault(owner or "", StoreStats())

    def __len__(self) -> int:
        with self._lock, self._named():
            return int(self._db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def rows(
        self,
        owner: str | None,
        namespace: str | None,
        keys: Sequence[str],
        compute: Callable[[list[int]], list[V]],
        codec: tuple[Callable[[V], bytes], Callable[[bytes], V]],
    ) -> list[V]:
        """Values for ``keys`` in order: stored rows read back, the rest computed by
        ``compute(indices)`` (one call, first-seen order, duplicates computed once) and written with
        ``codec = (encode, decode)``. ``namespace=None`` (an unkeyable call) computes everything and
        stores nothing. Counters go to ``owner``'s :meth:`stats`."""
        stats = self.stats(owner)
        if namespace is None:
            stats.uncacheable += len(keys)
            return compute(list(range(len(keys))))
        encode, decode = codec
        stored = self.get(namespace, keys)
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in stored:
                first.setdefault(k, i)
        stats.hits += sum(1 for k in keys if k in stored)
        values: dict[str, V] = {k: decode(v) for k, v in stored.items()}
        if first:
            computed = compute(list(first.values()))
            if len(computed) != len(first):
                raise RuntimeError(f"store: computed {len(computed)} rows for {len(first)} inputs")
            fresh = dict(zip(first, computed, strict=True))
            self.put(namespace, {k: encode(v) for k, v in fresh.items()})
            stats.writes += len(fresh)
            values.update(fresh)
        return [values[k] for k in keys]


ARRAY_CODEC: tuple[Callable[[torch.Tensor], bytes], Callable[[bytes], torch.Tensor]] = (
    encode_array, decode_array)
TEXT_CODEC: tuple[Callable[[str], bytes], Callable[[bytes], str]] = (
    lambda v: v.encode("utf-8"), lambda b: b.decode("utf-8"))
