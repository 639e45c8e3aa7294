"""Build S3E records (S3E Eq. 11, Table 3, App. B "Conversion into S3E roles") and count exclusions.

Construction rule (documented here because the paper's substrate is not public):

* c+ — the source's image-supported caption (SugarCrepe ``caption``, ARO ``true_caption``, COCO-Order
  ``caption``, Winoground ``caption_j`` for ``image_j``); ``faithtests.protocols.s3e.sources`` maps the
  typed records of the ``faithtests.data`` loaders to ``RoleSource``s.
* c_stress — the source's meaning-changing foil (SugarCrepe ``negative_caption``, ARO ``false_caption``,
  one seeded COCO-Order negative, Winoground the other caption of the pair), typed by
  ``s3e_sources.stress_type_for``.
* c_pres — ``preserve(c+, rng)``: a meaning-preserving rewrite. Default: a template paraphrase
  (``PRESERVE_TEMPLATES``, "In this photo, {c+}.").
* c_lex — ``lexical(c+, rng)``: a different meaning-preserving surface form. Default
  (``default_lexical``): the word-level ``synonym`` rewrite of ``faithtests.protocols.lgip.paraphrase``; where
  no synonym applies, its structural rewrites (``pp_front``, ``clause_front``, ``passive``); else a
  discourse-marker template (``LEXICAL_TEMPLATES``). It must differ from c_pres (Table 3).
* All captions are stored whitespace-normalised (``clean_caption``).
* c_rand — the c+ of another surviving item, drawn by a seeded ``numpy.random.Generator``, never from the
  same item or image, never textually equal to one of the item's captions; by default from the same
  source so caption style is matched (the paper only says "sampled outside the source item").

A rewrite callable returns ``None`` when it cannot rewrite a caption; the item is then excluded.
Degenerate records are excluded and counted by reason (App. B "Filtering and matching principles"):
``missing_field:<name>``, ``invalid_stress_type``, ``duplicate_item_id``, ``missing_image``,
``no_preserve``, ``no_lexical``, ``identical:<role>=<role>``, ``random_unverified``,
``random_same_item``, ``random_same_image``, ``no_random_candidate``. Strings are compared after
``normalize_caption`` (case, whitespace, final punctuation), so "A cat." and "a cat" count as identical.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final, cast

import numpy as np

from faithtests.protocols.lgip.paraphrase import paraphrase_candidates
from faithtests.protocols.s3e.records import STRESS_TYPES, S3ERecord, StressType

RewriteFn = Callable[[str, np.random.Generator], str | None]

PRESERVE_TEMPLATES: Final[tuple[str, ...]] = ("In this photo, {caption}.", "In this picture, {caption}.")
LEXICAL_TEMPLATES: Final[tuple[str, ...]] = ("As shown here, {caption}.", "Pictured here: {caption}.")


def normalize_caption(caption: str) -> str:
    """Comparison key for "identical strings": casefolded, whitespace collapsed, final .!? removed."""
    return re.sub(r"\s+", " ", caption).strip().rstrip(".!?").strip().casefold()


def clean_caption(caption: str) -> str:
    """Whitespace-normalised caption as stored in a record: SugarCrepe captions carry stray newlines and
    trailing spaces that would break the quoted option lines of the App. A prompt."""
    return " ".join(caption.split())


def template_rewrite(templates: Sequence[str]) -> RewriteFn:
    """A rewrite that wraps the caption in one of ``templates`` (``{caption}``), chosen by the rng.

    The caption's final punctuation is dropped and its first letter lowercased unless the first word is
    an acronym ("TV"), so "A dog runs." becomes "In this photo, a dog runs.".
    """
    if not templates or any("{caption}" not in t for t in templates):
        raise ValueError("template_rewrite: every template needs a {caption} slot")
    frozen = tuple(templates)

    def rewrite(caption: str, rng: np.random.Generator) -> str | None:
        body = caption.strip().rstrip(".!?").strip()
        if not body:
            return None
        first = body.split()[0]
        if not (len(first) > 1 and first.isupper()):
            body = body[0].lower() + body[1:]
        return frozen[int(rng.integers(len(frozen)))].format(caption=body)

    return rewrite


#: ``candidates(caption) -> [(text, (kind, rule)), ...]``, e.g. ``paraphrase.paraphrase_candidates``.
CandidateFn = Callable[[str], Sequence[tuple[str, tuple[str, str]]]]


def candidate_rewrite(candidates: CandidateFn, rules: Sequence[str]) -> RewriteFn:
    """A rewrite from a paraphrase generator: among the candidates of the first rule in ``rules`` that
    yields one differing from the caption, pick one with the rng; ``None`` if no rule applies."""
    wanted = tuple(rules)

    def rewrite(caption: str, rng: np.random.Generator) -> str | None:
        key = normalize_caption(caption)
        cands = candidates(caption)
        for rule in wanted:
            texts = [text for text, (_, r) in cands if r == rule and normalize_caption(text) != key]
            if texts:
                return texts[int(rng.integers(len(texts)))]
        return None

    return rewrite


def first_of(*rewrites: RewriteFn) -> RewriteFn:
    """The first rewrite that returns a caption (all share the item's rng)."""

    def rewrite(caption: str, rng: np.random.Generator) -> str | None:
        for fn in rewrites:
            out = fn(caption, rng)
            if out is not None and out.strip():
                return out
        return None

    return rewrite


def default_lexical() -> RewriteFn:
    """Synonym rewrite, else a structural rewrite, else a discourse-marker template (see module doc)."""
    return first_of(
        candidate_rewrite(paraphrase_candidates, ("synonym",)),
        candidate_rewrite(paraphrase_candidates, ("pp_front", "clause_front", "passive")),
        template_rewrite(LEXICAL_TEMPLATES),
    )


@dataclass(frozen=True)
class RoleSource:
    """One source example before role construction. Preset controls (e.g. from the reference world's
    exact ground truth) are used as given; a preset c_rand needs its provenance to be checked."""

    item_id: str
    image_ref: str
    c_pos: str
    c_stress: str
    stress_type: str
    source: str
    c_pres: str | None = None
    c_lex: str | None = None
    c_rand: str | None = None
    rand_item_id: str | None = None
    rand_image_ref: str | None = None


def role_source(record: S3ERecord) -> RoleSource:
    """A built record as a fully preset source, so ``build_s3e_records`` re-checks it (e.g. the
    reference world's records) with the same degeneracy rules and counts."""
    return RoleSource(
        item_id=record.item_id,
        image_ref=record.image_ref,
        c_pos=record.c_pos,
        c_stress=record.c_stress,
        stress_type=record.stress_type,
        source=record.source,
        c_pres=record.c_pres,
        c_lex=record.c_lex,
        c_rand=record.c_rand,
        rand_item_id=record.rand_item_id,
        rand_image_ref=record.rand_image_ref,
    )


def _text(x: object) -> str:
    return x if isinstance(x, str) else ""


_REQUIRED = ("item_id", "image_ref", "c_pos", "c_stress", "stress_type", "source")


def _static_reason(src: RoleSource, seen: set[str], image_exists: Callable[[str], bool] | None) -> str | None:
    for name in _REQUIRED:
        if not _text(getattr(src, name)).strip():
            return f"missing_field:{name}"
    if src.stress_type not in STRESS_TYPES:
        return "invalid_stress_type"
    if src.item_id in seen:
        return "duplicate_item_id"
    if image_exists is not None and not image_exists(src.image_ref):
        return "missing_image"
    return None


def _identical(captions: Mapping[str, str]) -> str | None:
    keys = {role: normalize_caption(text) for role, text in captions.items()}
    for a, b in combinations(keys, 2):
        if keys[a] == keys[b]:
            return f"identical:{a}={b}"
    return None


def _preset_rand_reason(src: RoleSource) -> str | None:
    if not _text(src.c_rand).strip():
        return "missing_field:c_rand"
    if src.rand_item_id is None or src.rand_image_ref is None:
        return "random_unverified"
    if src.rand_item_id == src.item_id:
        return "random_same_item"
    if src.rand_image_ref == src.image_ref:
        return "random_same_image"
    return None


def _role_reason(src: RoleSource, roles: Mapping[str, str | None]) -> str | None:
    if not (roles["c_pres"] or "").strip():
        return "no_preserve"
    if not (roles["c_lex"] or "").strip():
        return "no_lexical"
    if src.c_rand is not None and (reason := _preset_rand_reason(src)) is not None:
        return reason
    return _identical({k: v or "" for k, v in roles.items()})


@dataclass(frozen=True)
class _Partial:
    src: RoleSource
    roles: dict[str, str]  # c_pos, c_pres, c_lex, c_stress (+ c_rand when preset)


def build_s3e_records(
    sources: Iterable[RoleSource],
    *,
    seed: int,
    preserve: RewriteFn | None = None,
    lexical: RewriteFn | None = None,
    image_exists: Callable[[str], bool] | None = None,
    rand_within_source: bool = True,
    max_draws: int = 64,
) -> tuple[list[S3ERecord], Counter[str]]:
    """Records in input order and a Counter of exclusion reasons (S3E Eq. 11, App. B).

    ``preserve`` / ``lexical`` build c_pres / c_lex when a source does not preset them (defaults: the
    template rewrites above). Each item's rewrites use ``default_rng([seed, 1, position])``, the random
    negatives one ``default_rng([seed, 0])`` stream, so the output depends only on inputs and seed.
    """
    pres_fn = preserve if preserve is not None else template_rewrite(PRESERVE_TEMPLATES)
    lex_fn = lexical if lexical is not None else default_lexical()
    excluded: Counter[str] = Counter()
    seen: set[str] = set()
    partial: list[_Partial] = []
    for pos, src in enumerate(sources):
        reason = _static_reason(src, seen, image_exists)
        if reason is None:
            seen.add(src.item_id)
            rng = np.random.default_rng([seed, 1, pos])
            c_pres = src.c_pres if src.c_pres is not None else pres_fn(src.c_pos, rng)
            c_lex = src.c_lex if src.c_lex is not None else lex_fn(src.c_pos, rng)
            roles = {"c_pos": src.c_pos, "c_pres": c_pres, "c_lex": c_lex, "c_stress": src.c_stress}
            if src.c_rand is not None:
                roles["c_rand"] = src.c_rand
            reason = _role_reason(src, roles)
            if reason is None:
                partial.append(_Partial(src, {k: clean_caption(v or "") for k, v in roles.items()}))
        if reason is not None:
            excluded[reason] += 1
    records = _attach_random(
        partial, excluded, np.random.default_rng([seed, 0]), rand_within_source, max_draws
    )
    return records, excluded


def _attach_random(
    partial: list[_Partial],
    excluded: Counter[str],
    rng: np.random.Generator,
    within_source: bool,
    max_draws: int,
) -> list[S3ERecord]:
    pools: dict[str, list[int]] = {}
    for i, p in enumerate(partial):
        pools.setdefault(p.src.source if within_source else "", []).append(i)
    records = []
    for i, p in enumerate(partial):
        if "c_rand" in p.roles:
            j_src = (p.roles["c_rand"], p.src.rand_item_id, p.src.rand_image_ref)
        else:
            j = _draw(i, partial, pools[p.src.source if within_source else ""], rng, max_draws)
            if j is None:
                excluded["no_random_candidate"] += 1
                continue
            o = partial[j].src
            j_src = (partial[j].roles["c_pos"], o.item_id, o.image_ref)
        r = p.roles
        records.append(
            S3ERecord(
                item_id=p.src.item_id,
                image_ref=p.src.image_ref,
                c_pos=r["c_pos"],
                c_pres=r["c_pres"],
                c_lex=r["c_lex"],
                c_stress=r["c_stress"],
                c_rand=j_src[0],
                stress_type=cast(StressType, p.src.stress_type),  # checked in _static_reason
                source=p.src.source,
                rand_item_id=j_src[1],
                rand_image_ref=j_src[2],
            )
        )
    return records


def _draw(
    i: int, partial: list[_Partial], pool: list[int], rng: np.random.Generator, max_draws: int
) -> int | None:
    me = partial[i]
    taken = {normalize_caption(t) for t in me.roles.values()}

    def ok(j: int) -> bool:
        o = partial[j].src
        return (
            o.image_ref != me.src.image_ref
            and o.item_id != me.src.item_id
            and normalize_caption(partial[j].roles["c_pos"]) not in taken
        )

    # Rejection sampling is O(1) per item on real pools; the full scan only runs when it keeps failing.
    for _ in range(max_draws):
        j = pool[int(rng.integers(len(pool)))]
        if ok(j):
            return j
    valid = [j for j in pool if ok(j)]
    return valid[int(rng.integers(len(valid)))] if valid else None
