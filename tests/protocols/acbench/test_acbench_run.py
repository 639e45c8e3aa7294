"""The AC-Bench runner on stand-in models built from the world's ground truth (an image follower, a text
follower, one constant label), its invalid counting by kind, both answer modes, the conflict score, the
window rule, the CECS hook wiring (the answer query of a constrained call), and both sides of the gates
in suites/thresholds.toml on the stand-ins."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from faithtests.data.loaded import ImageRef
from faithtests.models.interfaces import Attentions, Hooks, Prompt, TokenSpans
from faithtests.protocols import load_suite_thresholds
from faithtests.protocols.acbench.metrics import aligned_accuracy, answer_shares, by_subset
from faithtests.protocols.acbench.prompts import YES_NO
from faithtests.protocols.acbench.records import EMOTIONS, AcRecord
from faithtests.protocols.acbench.run import (
    IMAGE_LABEL_CLASH,
    NON_FINITE,
    PROBE_NON_FINITE,
    TIE,
    UNPARSEABLE,
    UNREADABLE,
    Answers,
    answer,
    conflict_scores,
    label_of,
    label_token_counts,
    prompts_for,
    rescored,
    usable,
)
from faithtests.protocols.acbench.sources import world_records
from faithtests.protocols.acbench.steering import active_rows, choose_window, steering_hooks

ROOT = Path(__file__).resolve().parents[3]
_TEXT_ONLY = re.compile(r'"""(.*)"""', re.S)


class OracleVLM:
    """Answers from the world's ground truth: ``follow`` = "image" (y_img of the prompt's image),
    "text" (y_txt of its description), or one of the eight labels always. Image-only prompts get
    y_img, text-only prompts y_txt (a perfect unimodal model), unless the answer is a constant.
    ``reply`` formats generated answers; the probe answers Yes / No with log-probs ``probe``."""

    spec = "stand-in:oracle"
    num_layers = 2

    def __init__(
        self,
        records: Sequence[AcRecord],
        follow: str = "image",
        reply: str = "{label}.",
        probe: tuple[float, float] = (-0.1, -2.4),
    ) -> None:
        self.follow, self.reply, self.probe = follow, reply, probe
        self.y_txt = {r.description: r.text_emotion for r in records}
        self.y_img = {r.load_image().tobytes(): r.image_emotion for r in records}
        self.calls: list[tuple[int, Hooks | None]] = []

    def label(self, p: Prompt) -> str:
        if self.follow in EMOTIONS:
            return self.follow
        if not p.images:
            m = _TEXT_ONLY.search(p.text)
            assert m is not None
            return str(self.y_txt[m[1]])
        if p.description is None or self.follow == "image":
            return self.y_img[p.images[0].tobytes()]
        return str(self.y_txt[p.description])

    def answer_logprob(
        self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        self.calls.append((len(prompts), hooks))
        if tuple(answers) == YES_NO:
            return torch.tensor([list(self.probe)] * len(prompts))
        assert tuple(answers) == EMOTIONS
        return torch.tensor([[0.0 if a == self.label(p) else -5.0 for a in answers] for p in prompts])

    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
    ) -> list[str]:
        return [self.reply.format(label=self.label(p)) for p in prompts]


def _recs(n: int = 12) -> list[AcRecord]:
    return world_records(n, seed=0)


def _gold(recs: Sequence[AcRecord]) -> tuple[list[str], list[str | None], list[str]]:
    return [r.image_emotion for r in recs], [r.text_emotion for r in recs], [r.subset for r in recs]


def _passes(metric: str, value: float) -> bool:
    th = load_suite_thresholds(ROOT / "suites" / "thresholds.toml").lookup("affective_conflict", metric)
    assert th is not None, metric
    return value >= th.value if th.op == ">=" else value <= th.value


def _run(vlm: OracleVLM, recs: list[AcRecord], mode: str = "constrained") -> Answers:
    return answer(vlm, prompts_for("emotion", recs), [r.item_id for r in recs], mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["constrained", "generation"])
def test_image_follower_passes_and_text_follower_fails_the_gates(mode: str) -> None:
    recs = _recs()
    y_img, y_txt, sub = _gold(recs)
    img = _run(OracleVLM(recs, "image"), recs, mode)
    s = answer_shares(img.pred, y_img, y_txt)
    assert (s.p_img, s.p_txt, s.tbr, s.n) == (1.0, 0.0, 0.0, 60)
    assert _passes("P_img", s.p_img) and _passes("TBR", s.tbr)
    assert _passes("aligned_acc", aligned_accuracy(img.pred, y_img, sub))
    txt = _run(OracleVLM(recs, "text"), recs, mode)
    t = answer_shares(txt.pred, y_img, y_txt)
    assert (t.p_img, t.p_txt, t.tbr) == (0.0, 1.0, 1.0)
    assert not _passes("P_img", t.p_img) and not _passes("TBR", t.tbr)
    # a text follower is right whenever the text is: the aligned gate cannot catch it, P_img / TBR do
    assert aligned_accuracy(txt.pred, y_img, sub) == 1.0
    assert set(by_subset(txt.pred, y_img, y_txt, sub)) == {"S-Adj", "S-Opp", "O-Obj", "O-Attr", "O-Beh"}
    assert not img.counted.invalid and not txt.counted.invalid


@pytest.mark.parametrize("label", EMOTIONS)
def test_a_one_label_model_fails_the_gates(label: str) -> None:
    recs = _recs(40)
    y_img, y_txt, sub = _gold(recs)
    pred = _run(OracleVLM(recs, label), recs).pred
    s = answer_shares(pred, y_img, y_txt)
    acc = aligned_accuracy(pred, y_img, sub)
    assert s.p_img < 0.35 and not _passes("P_img", s.p_img)
    assert acc < 0.35 and not _passes("aligned_acc", acc)


def test_unimodal_prompts_reach_the_model_without_the_other_signal() -> None:
    recs = _recs(6)
    vlm = OracleVLM(recs, "text")  # follows the description when it has one; unimodal prompts: their signal
    im = prompts_for("image-only", recs)
    assert all(p.description is None and p.images for p in im)
    assert answer(vlm, im, [r.item_id for r in recs], "constrained").pred == [r.image_emotion for r in recs]
    tx = prompts_for("text-only", recs)
    assert all(
        not p.images and p.description is None and (r.description or "") in p.text
        for p, r in zip(tx, recs, strict=True)
    )
    assert answer(vlm, tx, [r.item_id for r in recs], "constrained").pred == [r.text_emotion for r in recs]


class TableVLM(OracleVLM):
    """Label log-probabilities from a fixed table, row by prompt order."""

    def __init__(self, records: Sequence[AcRecord], table: np.ndarray) -> None:
        super().__init__(records)
        self.table, self.i = table, 0

    def answer_logprob(
        self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        rows = self.table[self.i : self.i + len(prompts)]
        self.i += len(prompts)
        return torch.tensor(rows)


def test_constrained_mode_takes_the_argmax_and_never_guesses_a_tie() -> None:
    recs = _recs(1)[:4]
    table = np.full((4, 8), -3.0)
    table[0, 2] = -0.5  # awe
    table[1, [1, 6]] = -0.7  # anger and fear tied at the top
    table[2, 0] = np.nan
    table[3, [4, 5]] = (-1.0, -0.9)  # excitement by a hair
    vlm = TableVLM(recs, table)
    a = _run(vlm, recs)
    assert a.pred == ["awe", None, None, "excitement"]
    assert a.counted.invalid == {TIE: 1, NON_FINITE: 1}
    assert a.counted.examples[TIE] == [recs[1].item_id]
    assert a.logprobs is not None and a.logprobs.shape == (4, 8)
    assert label_of(np.array([0.0] * 8)) == (None, TIE)


def test_length_normalised_rescoring_by_hand() -> None:
    """``rescored`` re-decides the same log-probabilities per token, without a model call: a row whose
    whole-label argmax is awe (-1.0, one token) goes to contentment (-1.6 over 2 tokens = -0.8)."""
    recs = _recs(1)[:2]
    table = np.full((2, 8), -5.0)
    table[0, 2], table[0, 3] = -1.0, -1.6  # awe, contentment
    table[1, 0] = -0.2  # amusement either way
    a = _run(TableVLM(recs, table), recs)
    counts = np.ones((2, 8))
    counts[:, 3] = 2.0
    r = rescored(a, counts)
    assert a.pred == ["awe", "amusement"] and r.pred == ["contentment", "amusement"]
    assert r.logprobs is not None and r.logprobs[0, 3] == pytest.approx(-0.8)
    assert a.logprobs is not None and a.logprobs[0, 3] == pytest.approx(-1.6)  # base answers left alone
    assert label_token_counts(TableVLM(recs, table), prompts_for("emotion", recs)) is None  # no tokenizer


def test_every_label_is_one_token_of_the_reference_tokenizer() -> None:
    """Measured: the reference VLM's word-level tokenizer has each of the eight labels as one token, so
    whole-label and length-normalised scoring agree on it (BPE tokenizers split some labels)."""
    from faithtests.models.registry import load_model

    vlm = load_model("reference:vlm", device="cpu", dtype="float32")
    counts = label_token_counts(vlm, prompts_for("emotion", _recs(1)[:2]))
    assert counts is not None and (counts == 1).all()


def test_one_constrained_call_per_prompt() -> None:
    """One prompt per call: the prefix cache shares the whole prompt, and a CECS call has one s."""
    recs = _recs(2)
    vlm = OracleVLM(recs)
    _run(vlm, recs)
    assert [n for n, _ in vlm.calls] == [1] * len(recs)


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ("{label}.", True),
        ("The emotion is {label}", True),
        ("joy", False),
        ("{label} or fear", False),
        ("", False),
    ],
)
def test_generation_is_parsed_strictly_and_other_is_counted(reply: str, parsed: bool) -> None:
    recs = [r for r in _recs(4) if r.image_emotion != "fear"]
    a = _run(OracleVLM(recs, "image", reply=reply), recs, "generation")
    if parsed:
        assert a.pred == [r.image_emotion for r in recs] and not a.counted.invalid
    else:
        assert a.pred == [None] * len(recs)
        assert a.counted.invalid == {UNPARSEABLE: len(recs)}
        assert len(a.counted.examples[UNPARSEABLE]) == min(5, len(recs))
        # never mapped to the nearest label: an unparseable answer is "other" (P_oth), not y_img
        s = answer_shares(a.pred, *_gold(recs)[:2])
        assert s.p_oth == 1.0


def test_unreadable_images_are_counted_per_record_and_the_rest_go_on(tmp_path: Path) -> None:
    """One image's file does not decode, another's has gone missing: each of their records is counted
    ``unreadable image`` (naming the path) and the third image's records run."""
    recs = _recs(3)  # 18 records, 3 images
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"not a jpeg")
    refs = {recs[6].stimulus_id: ImageRef(corrupt), recs[12].stimulus_id: ImageRef(tmp_path / "gone.jpg")}
    mixed = [replace(r, loader=refs[r.stimulus_id].load) if r.stimulus_id in refs else r for r in recs]
    u = usable(mixed)
    assert u.invalid == {UNREADABLE: 12} and u.total == 18
    assert u.records == recs[:6] and [r.stimulus_id for r in u.images] == [recs[0].stimulus_id]
    assert len(u.examples[UNREADABLE]) == 5 and all("corrupt.jpg" in e for e in u.examples[UNREADABLE])
    only_gone = usable([r for r in mixed if r.stimulus_id == recs[12].stimulus_id])
    assert (
        only_gone.invalid == {UNREADABLE: 6}
        and "gone.jpg: file not found" in only_gone.examples[UNREADABLE][0]
    )
    a = _run(OracleVLM(u.records), u.records)
    assert len(a.pred) == 6 and not a.counted.invalid


def test_an_image_whose_records_disagree_on_y_img_leaves_the_image_only_baseline() -> None:
    r = _recs(1)[0]
    other = next(e for e in EMOTIONS if e != r.image_emotion)
    clash = AcRecord("x", r.stimulus_id, "image-only", other, None, None, r.image, loader=r.loader)
    u = usable([r, clash])
    assert u.images == [] and u.invalid == {IMAGE_LABEL_CLASH: 1} and u.records == [r]


def test_conflict_score_is_eq5_on_the_probe_yes_no() -> None:
    recs = _recs(1)
    s, bad = conflict_scores(OracleVLM(recs, probe=(-0.1, -2.4)), recs)
    assert s == pytest.approx(np.full(6, 1 / (1 + np.exp(2.3))))  # σ(lp_no − lp_yes)
    assert not bad.invalid and active_rows(s) == []
    s, bad = conflict_scores(OracleVLM(recs, probe=(float("nan"), 0.0)), recs)
    assert np.isnan(s).all() and bad.invalid == {PROBE_NON_FINITE: 6} and active_rows(s) == []
    hi, _ = conflict_scores(OracleVLM(recs, probe=(-3.0, -0.05)), recs)
    assert active_rows(hi) == list(range(6))  # s ≈ 0.95 ≥ τ


def test_window_rules_option_paper_name_then_own_lss_curve() -> None:
    curve = np.array([1.0, 1.1, 1.0, 3.0, 3.5, 3.2, 1.0, 0.9])
    assert choose_window(8, "hf:x", curve, (2, 3)) == ((2, 3), "option --faith-cecs-window")
    assert choose_window(36, "hf:Qwen/Qwen3-VL-8B-Instruct", None) == (
        (17, 24),
        "paper window of Qwen/Qwen3-VL-8B-Instruct",
    )
    assert choose_window(36, "hf:/models/Qwen3-VL-8B-Instruct/", None)[0] == (17, 24)
    w, rule = choose_window(8, "reference:vlm", curve, curve_name="base S-Opp LSS")
    assert w == (3, 5) and rule == "window_from_lss on the base S-Opp LSS curve"
    with pytest.raises(ValueError, match=r"decoder layers 0\.\.5"):
        choose_window(6, "x", curve, (4, 6))
    with pytest.raises(ValueError, match=r"decoder layers 0\.\.5"):
        choose_window(6, "hf:Qwen/Qwen3-VL-8B-Instruct", None)
    with pytest.raises(ValueError, match="no peak"):
        choose_window(4, "x", np.ones(4))


# ---------------------------------------------------------------------------------- CECS wiring
P_LEN, A_LEN = 10, 2  # prompt tokens (0-1 other, 2-5 image, 6-8 description, 9 last) + answer tokens


def _sink_weights(rows: int, q: int, k: int) -> torch.Tensor:
    """Causal rows over ``k`` keys with image mass 0.1 and description mass 0.6 where both are
    visible (r_now = 1/7: a linguistic sink)."""
    w = torch.zeros(rows, 2, q, k)
    for qi in range(q):
        pos = k - q + qi
        row = torch.zeros(k)
        row[: pos + 1] = 0.3 / max(1, pos + 1 - 7)
        row[2:6] = 0.1 / 4
        row[6:9] = 0.6 / 3
        row[: pos + 1] /= row[: pos + 1].sum()
        w[:, :, qi] = row
    return w


class SinkVLM(OracleVLM):
    """Mimics the HF adapter's constrained call: rows of prompt + answer whose ``TokenSpans.length``
    counts the answer; the label is y_img if the image share at the query that predicts it (the last
    prompt token, after every attention modifier) is ≥ ½, else y_txt."""

    num_layers = 1

    def answer_logprob(
        self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        if tuple(answers) == YES_NO:
            return super().answer_logprob(prompts, answers, hooks)
        rows = len(prompts) * len(answers)
        n = P_LEN + A_LEN
        spans = TokenSpans(
            image=[(2, 6)] * rows,
            description=[(6, 9)] * rows,
            length=[n] * rows,
            image_runs=[[(2, 6)]] * rows,
            offset=[0] * rows,
        )
        w = _sink_weights(rows, n, n)
        if hooks is not None and 0 in hooks.attention:
            w = hooks.attention[0](0, w, spans)
        q = w[0, :, P_LEN - 1]
        share = float(q[:, 2:6].sum() / (q[:, 2:6].sum() + q[:, 6:9].sum()))
        out = []
        for p in prompts:
            y = self.y_img[p.images[0].tobytes()] if share >= 0.5 else str(self.y_txt[p.description])
            out.append([0.0 if a == y else -5.0 for a in answers])
        return torch.tensor(out)

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions:
        n = len(prompts)
        spans = TokenSpans(
            image=[(2, 6)] * n,
            description=[(6, 9)] * n,
            length=[P_LEN] * n,
            image_runs=[[(2, 6)]] * n,
            offset=[0] * n,
        )
        w = _sink_weights(n, P_LEN, P_LEN)
        if hooks is not None and 0 in hooks.attention:
            w = hooks.attention[0](0, w, spans)
        return Attentions(weights=[w[:, :, -1]], spans=spans)


def test_cecs_steers_the_query_that_predicts_the_label_in_a_constrained_call() -> None:
    """With the prompt's own length the modifier reaches the last prompt token (the answer flips to
    y_img); with the adapter's prompt + answer length it would steer only the end of the label and
    change nothing; below the gate nothing changes."""
    recs = [r for r in _recs(2) if r.conflict]
    vlm = SinkVLM(recs, "text")
    ids = [r.item_id for r in recs]
    ps = prompts_for("emotion", recs)
    assert answer(vlm, ps, ids, "constrained").pred == [r.text_emotion for r in recs]
    fixed = answer(vlm, ps, ids, "constrained", lambda i: steering_hooks(1.0, (0, 0), prompt_length=P_LEN))
    assert fixed.pred == [r.image_emotion for r in recs]
    naive = answer(vlm, ps, ids, "constrained", lambda i: steering_hooks(1.0, (0, 0)))
    assert naive.pred == [r.text_emotion for r in recs]
    gated = answer(vlm, ps, ids, "constrained", lambda i: steering_hooks(0.59, (0, 0), prompt_length=P_LEN))
    assert gated.pred == [r.text_emotion for r in recs]
    tag = steering_hooks(0.9, (0, 0), prompt_length=P_LEN).tag
    assert tag is not None and "s=[0.900000]" in tag and tag.endswith(f"answer_at={P_LEN}")


def test_mass_monitor_sees_every_steered_row() -> None:
    from faithtests.protocols.acbench.run import lss_run
    from faithtests.protocols.acbench.steering import MassMonitor

    recs = _recs(1)[:3]
    vlm = SinkVLM(recs)
    m = MassMonitor()
    base = lss_run(vlm, prompts_for("emotion", recs))  # type: ignore[arg-type]
    steered = lss_run(vlm, prompts_for("emotion", recs), lambda i: steering_hooks(1.0, (0, 0), monitor=m))  # type: ignore[arg-type]
    assert m.rows == 3 * 2 and m.calls == 3  # one prompt per call, 2 heads, the answer query only
    assert m.max_sum_err < 1e-6 and m.max_shift < 1e-6
    assert (steered.per_item < base.per_item).all() and base.lengths == [P_LEN] * 3


def test_take_replaces_only_the_steered_rows() -> None:
    a = Answers(
        "generation",
        ["a", "b", "c"],
        ["awe", "fear", None],
        [None, None, UNPARSEABLE],
        replies=["awe", "fear", "?"],
    )
    b = Answers("generation", ["c"], ["anger"], [None], replies=["anger"])
    out = a.take([2], b, [0])
    assert out.pred == ["awe", "fear", "anger"] and out.kinds == [None] * 3 and out.replies[2] == "anger"
    assert a.pred[2] is None  # the base answers are untouched


def test_on_the_reference_vlm_the_hooks_reach_the_answer_and_keep_rows_distributions() -> None:
    """Real adapter: ``cecs.cecs_hooks`` as is cannot move a constrained answer (the adapter's spans
    count the label's tokens); ``steering_hooks`` with the prompt's length does; every modified real
    attention row sums to 1 within 1e-6; below the gate the outputs are those of the unhooked model."""
    from faithtests.models.registry import load_model
    from faithtests.protocols.acbench.cecs import cecs_hooks
    from faithtests.protocols.acbench.run import gate_check, lss_run, mass_check

    vlm = load_model("reference:vlm", device="cpu", dtype="float32")
    recs = [r for r in _recs(1) if r.conflict][:2]
    ps = prompts_for("emotion", recs)
    window = (0, vlm.num_layers - 1)
    lengths = lss_run(vlm, ps).lengths
    base = vlm.answer_logprob(ps[:1], EMOTIONS).numpy()
    naive = vlm.answer_logprob(ps[:1], EMOTIONS, cecs_hooks(1.0, window)).numpy()
    steered = vlm.answer_logprob(
        ps[:1], EMOTIONS, steering_hooks(1.0, window, prompt_length=lengths[0])
    ).numpy()
    assert np.abs(naive - base).max() < 1e-4 < np.abs(steered - base).max()
    mass = mass_check(vlm, ps, window)
    assert mass.rows == len(ps) * vlm.num_layers * 4  # every head of the answer query in every layer
    assert mass.max_sum_err < 1e-6
    g = gate_check(vlm, ps, lengths, window)
    assert g.max_logprob_diff < 1e-4 and g.max_lss_diff < 1e-4 and g.same_replies


def test_monitored_steering_hooks_are_never_stored() -> None:
    """A monitored call must run (a stored row would skip the monitor): no tag, so no cache key."""
    from faithtests.models.store import hooks_key
    from faithtests.protocols.acbench.steering import MassMonitor, steering_hooks

    assert hooks_key(steering_hooks(1.0, (0, 0))) is not None
    assert hooks_key(steering_hooks(1.0, (0, 0), monitor=MassMonitor())) is None


def test_monitored_totals_are_stored_beside_the_outputs(tmp_path: Path) -> None:
    """``monitored_run`` with a store: the first call runs the monitored forwards and stores the totals,
    a second call with the same hooks and prompts reads them back without a forward (a warm re-run), and
    other hooks run again."""
    from faithtests.models.registry import load_model
    from faithtests.models.store import OutputStore
    from faithtests.protocols.acbench.run import mass_check

    vlm = load_model("reference:vlm", device="cpu", dtype="float32")
    ps = prompts_for("emotion", [r for r in _recs(1) if r.conflict][:2])
    window = (0, vlm.num_layers - 1)
    plain = mass_check(vlm, ps, window)  # no store: always runs
    vlm.use_store(OutputStore(tmp_path))

    def monitored_rows() -> int:  # monitored attention calls cannot be keyed: each row run is counted
        return vlm.store.stats(vlm.store_namespace).uncacheable  # type: ignore[no-any-return]

    first = mass_check(vlm, ps, window)
    ran = monitored_rows()
    again = mass_check(vlm, ps, window)
    assert again == first == plain and again.rows == len(ps) * vlm.num_layers * 4 and ran == len(ps)
    assert monitored_rows() == ran  # read back, not run
    assert mass_check(vlm, ps, (0, 0)).rows == len(ps) * 4 and monitored_rows() == 2 * ran  # other hooks
