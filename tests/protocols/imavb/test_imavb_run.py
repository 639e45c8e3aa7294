"""The IMAVB runner on stand-in models, the A1 prompt text, and both sides of the behavioural gates:
a model answering one letter, and one always rejecting, fail the defaults in suites/thresholds.toml."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from faithtests.models.interfaces import Decision, Hooks, Prompt
from faithtests.protocols import load_suite_thresholds
from faithtests.protocols.imavb.metrics import answers, correct, split_scores
from faithtests.protocols.imavb.prompts import last_valid_letter
from faithtests.protocols.imavb.run import run_choice, run_variant
from faithtests.protocols.imavb.shuffles import K_SHUFFLES
from faithtests.protocols.imavb.sources import world_records

ROOT = Path(__file__).resolve().parents[3]


def test_answer_parsers_never_guess() -> None:
    assert last_valid_letter("The shirt is blue, so B. Wait: the premise is wrong, E") == "E"
    assert last_valid_letter("I think Apple") is None


class LetterVLM:
    """Answers by a fixed rule on the displayed options: ``letter`` always, or the displayed position
    of the option text ``reject`` (always rejecting)."""

    spec = "stand-in"
    num_layers = 2

    def __init__(self, letter: str | None = None, reject: bool = False) -> None:
        self.letter, self.reject = letter, reject

    def decide(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> Decision:
        rows = []
        for p in prompts:
            lines = [ln for ln in p.text.split("\n") if ln[:1] in set("ABCDEF") and ln[1:3] == ". "]
            pick = (
                next(i for i, line in enumerate(lines) if "visual detail" in line)
                if self.reject
                else "ABCDEF".index(self.letter or "A")
            )
            rows.append([5.0 if i == pick else 0.0 for i in range(6)])
        logits = torch.tensor(rows)
        if hooks is not None and hooks.logit_adjuster is not None:
            logits = hooks.logit_adjuster(logits, list(options))
        return Decision(logits=logits, states=torch.zeros(2, len(prompts), 4))


def _scores(vlm: LetterVLM, n: int = 60):  # type: ignore[no-untyped-def]
    run = run_choice(vlm, world_records(n, seed=0))  # type: ignore[arg-type]
    gold = np.array([r.correct_index for r in run.records])
    c = correct(answers(run.logits), gold)
    return run, split_scores(
        c[:, 1:].mean(axis=1),
        [r.split for r in run.records],
        [r.stimulus_id for r in run.records],
        n_resamples=200,
    )


def _passes(metric: str, value: float) -> bool:
    th = load_suite_thresholds(ROOT / "suites" / "thresholds.toml").lookup("premise_rejection", metric)
    assert th is not None
    return value >= th.value if th.op == ">=" else value <= th.value


def test_run_maps_shuffled_answers_back_to_canonical_options() -> None:
    run, _ = _scores(LetterVLM(reject=True), n=10)
    assert run.logits.shape == (20, 4, 6) and run.states is not None and run.states.shape == (2, 20, 4)
    assert (answers(run.logits) == 4).all()  # E found wherever the shuffle showed it
    assert not (run.perms[:, 1:] == np.arange(6)).all(axis=2).all()  # shuffles did permute


@pytest.mark.parametrize("letter", list("ABCDEF"))
def test_a_one_letter_model_fails_the_gates(letter: str) -> None:
    _, ss = _scores(LetterVLM(letter=letter), n=100)
    assert ss.acc["misleading_vision"] < 0.35 and not _passes("mis_v", ss.acc["misleading_vision"])
    assert not _passes("Bal", ss.bal)
    assert not _passes("std_v", ss.acc["standard_vision"])  # 1/6 against the gate's 0.35
    assert abs(ss.bal - 1 / 6) < 0.08  # a letter lands on a uniformly random option under shuffles


class ReplyVLM(LetterVLM):
    """A2: log-probabilities ``true_lp`` / ``false_lp`` for TRUE / FALSE; A3: the canned ``reply``."""

    def __init__(self, true_lp: float = 0.0, false_lp: float = -1.0, reply: str = "B") -> None:
        super().__init__(letter="A")
        self.true_lp, self.false_lp, self.reply = true_lp, false_lp, reply

    def answer_logprob(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        assert tuple(options) == ("TRUE", "FALSE") and all("TRUE or FALSE" in p.text for p in prompts)
        return torch.tensor([[self.true_lp, self.false_lp]] * len(prompts))

    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
    ) -> list[str]:
        assert max_new_tokens == 512 and all(p.text.startswith("Think step by step") for p in prompts)
        return [self.reply] * len(prompts)


def test_a2_scores_true_on_standard_and_false_on_misleading_and_counts_ties() -> None:
    recs = world_records(10, seed=0)
    says_true = run_variant(ReplyVLM(), recs, "A2")  # type: ignore[arg-type]
    mis = np.array([r.misleading for r in says_true.records])
    assert (says_true.correct[~mis] == 1).all() and (says_true.correct[mis] == 0).all()
    assert says_true.replies == ["TRUE"] * 20 and not says_true.invalid
    tied = run_variant(ReplyVLM(true_lp=-0.5, false_lp=-0.5), recs, "A2")  # type: ignore[arg-type]
    assert tied.invalid == {"TRUE/FALSE tie (never guessed)": 20} and (tied.correct == 0).all()


def test_a3_reads_the_last_valid_letter_and_counts_unparseable_replies() -> None:
    recs = world_records(10, seed=0)
    e = run_variant(ReplyVLM(reply="The premise says red but it is blue, so E"), recs, "A3")  # type: ignore[arg-type]
    mis = np.array([r.misleading for r in e.records])
    assert (e.correct[mis] == 1).all() and (e.correct[~mis] == 0).all() and not e.invalid
    none = run_variant(ReplyVLM(reply="I cannot tell"), recs, "A3")  # type: ignore[arg-type]
    assert none.invalid == {"unparseable CoT answer (no letter A-F)": 20} and (none.correct == 0).all()
    assert len(none.examples["unparseable CoT answer (no letter A-F)"]) == 5


def test_a4_runs_the_a1_protocol_with_the_warning() -> None:
    vr = run_variant(LetterVLM(reject=True), world_records(10, seed=0), "A4")  # type: ignore[arg-type]
    mis = np.array([r.misleading for r in vr.records])
    assert (vr.correct[mis] == 1).all() and (vr.correct[~mis] == 0).all()
    with pytest.raises(ValueError, match="A1 is run_choice"):
        run_variant(LetterVLM(), world_records(1, seed=0), "A1")  # type: ignore[arg-type]


class ConstantVLM(LetterVLM):
    """The same logit for every letter: every answer is a tie."""

    def decide(self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
               ) -> Decision:
        return Decision(logits=torch.zeros(len(prompts), 6), states=torch.zeros(2, len(prompts), 4))


def test_a4_of_a_constant_model_counts_each_shuffle_out_of_all_shuffles() -> None:
    """A tie is counted per answer, K per record; the count's total is the answers, not the records (it
    was the records: a constant model's 3 x 20 ties over 20 raised in the suite's ``faith.invalid``)."""
    vr = run_variant(ConstantVLM(), world_records(10, seed=0), "A4")  # type: ignore[arg-type]
    kind, answers = "tied top logit", 20 * K_SHUFFLES  # 10 stimuli, standard and misleading: 20 records
    assert len(vr.records) == 20 and vr.invalid == {kind: answers} and vr.totals() == {kind: answers}
    assert (vr.correct == 0).all()  # ties count wrong, never guessed


def test_an_always_rejecting_model_fails_std_v() -> None:
    _, ss = _scores(LetterVLM(reject=True), n=50)
    assert ss.acc == {"standard_vision": 0.0, "misleading_vision": 1.0}
    assert not _passes("std_v", 0.0) and _passes("mis_v", 1.0)


def test_logit_lens_of_the_last_layer_is_the_model_output(tmp_path: Path) -> None:
    """Eqs. 3–4 through the model's own final norm and unembedding: at the last layer the lens must
    reproduce the adapter's next-token logits."""
    from faithtests.models.lens import lens_logits
    from faithtests.models.registry import load_model
    from faithtests.testing.tiny import build_tiny

    vlm = load_model(f"hf:{build_tiny('llava', tmp_path / 'm')}", device="cpu", dtype="float32")
    rec = world_records(2, seed=0)
    prompts = [Prompt(images=r.load_media(), text="describe the image") for r in rec]
    states = vlm.states(prompts)
    z = lens_logits(vlm.model, states)  # type: ignore[attr-defined]
    direct = vlm.next_token_logits(prompts)  # type: ignore[attr-defined]
    assert torch.allclose(z[-1], direct, atol=1e-4)


class TalkingVLM(LetterVLM):
    """Answers by generation only (no option log-probabilities, as ``transformers serve``): the letter
    ``LetterVLM`` would pick, as ``template`` words it; ``mute`` items get a reply naming no letter."""

    def __init__(self, letter: str | None = None, reject: bool = False, template: str = "{}",
                 mute: int = 0) -> None:
        super().__init__(letter, reject)
        self.template, self.mute, self.seen = template, mute, 0

    def lacks(self, feature: str) -> str:
        return "the endpoint returned no top_logprobs" if feature == "logprobs" else ""

    def decide(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a model without log-probabilities is never scored")

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 32,
                 hooks: Hooks | None = None) -> list[str]:
        picks = LetterVLM.decide(self, prompts, list("ABCDEF")).logits.argmax(dim=1).tolist()
        out = []
        for pick in picks:
            self.seen += 1
            out.append("I cannot see it" if self.seen <= self.mute else self.template.format("ABCDEF"[pick]))
        return out


def _generated_scores(vlm: TalkingVLM, n: int):  # type: ignore[no-untyped-def]
    from faithtests.models.letters import generated_by  # the answer mode the suites' fixtures pick

    run = run_choice(vlm, world_records(n, seed=0), generated=generated_by(vlm, "auto"))  # type: ignore[arg-type]
    gold = np.array([r.correct_index for r in run.records])
    c = correct(answers(run.logits), gold)
    return run, split_scores(c[:, 1:].mean(axis=1), [r.split for r in run.records],
                             [r.stimulus_id for r in run.records], n_resamples=200)


def test_generated_letters_map_back_to_canonical_options_with_no_states() -> None:
    run, ss = _generated_scores(TalkingVLM(reject=True, template="({}) the detail is not there"), 10)
    assert run.generated.startswith("no option log-probabilities") and run.states is None
    assert (answers(run.logits) == 4).all() and not run.unparsed  # E wherever the shuffle showed it
    assert ss.acc == {"standard_vision": 0.0, "misleading_vision": 1.0}


@pytest.mark.parametrize("letter", list("ABCDEF"))
def test_a_one_letter_model_answering_by_generation_fails_the_gates(letter: str) -> None:
    _, ss = _generated_scores(TalkingVLM(letter=letter), 100)
    assert not _passes("mis_v", ss.acc["misleading_vision"]) and not _passes("Bal", ss.bal)
    assert not _passes("std_v", ss.acc["standard_vision"])


def test_a_reply_naming_no_letter_is_counted_wrong_with_the_reply() -> None:
    from faithtests.protocols.imavb.results import ties  # the suite's count of answers without a letter

    vlm = TalkingVLM(reject=True, mute=3)  # the first record's fixed order and first two shuffles
    run, _ = _generated_scores(vlm, 10)
    first = run.records[0]
    assert (answers(run.logits[0, :3]) == -1).all() and answers(run.logits[0, 3]) == 4
    assert run.unparsed == {first.item_id: "I cannot see it"}
    t = ties(run, np.ones(len(run.records), dtype=bool))
    assert (t.n, t.total, t.items) == (3, 20 * 4, [f"{first.item_id}: 'I cannot see it'"])
    # A4: records 0 and 1 (4 prompts each) answer without a letter; record 1 is misleading, where the
    # rejecting policy is right: its answers count wrong, never guessed
    a4 = run_variant(TalkingVLM(reject=True, mute=8), world_records(10, seed=0), "A4",  # type: ignore[arg-type]
                     generated="--faith-answer-mode generated")
    assert a4.records[1].misleading and a4.correct[1] == 0.0 and a4.correct[3] == 1.0
    assert a4.invalid == {"reply names no option letter (counted wrong, never guessed)": 6}
