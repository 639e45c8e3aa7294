"""Probe-guided logit adjustment (PGLA, IMAVB §5, App. G): numpy / scikit-learn (torch for the gate
MLP), no model calls (the ``Hooks.logit_adjuster`` factory that runs it inside an adapter is
``run.pgla_hooks``).

A gate probe (MLP, 256 ReLU units, full-batch Adam lr 1e-3, 100 epochs, standardised inputs; App. G
and the public ``train_probes.py``) trained on 25% of the stimuli at l* gives P_mis per item. With
g = P_mis^p and Δ = max(L_A..D) − max(L_E, L_F):

    L_E' = L_E + σ(γ(g − α))·(sΔ + δ) − β/2        (Eq. 5)
    L_F' = L_F + σ(γ(g − α))·(sΔ + δ) + β/2        (Eq. 6)

* l* (:func:`pgla_layer`): the layer of highest 4-fold CV accuracy of the logistic probe (§4.3) computed
  on the 25% probe-training stimuli only, so the 75% evaluation rows never choose the layer.
* β = mean(L_E − L_F) over the standard items of the probe's training split, in the option orders the
  adjustment is applied to: the fixed order for the paper's protocol (Table 4), the K shuffles for the
  suite's shuffled protocol (a fixed-order β, which carries the fixed order's E/F positional preference,
  pushes shuffled answers to F: measured ΔBal −0.26 on reference:vlm, README).
* The 162 configurations (γ, p, α, s, δ) are tuned by 5-fold CV on the other 75% (stratified by split,
  grouped by stimulus): tuned on four folds for the highest Bal, evaluated on the fifth; every reported
  number is held out. Bal is Eq. 1 over the splits present (per split, then averaged).
* Pareto rows (Table 11) pick, per fold, the best Bal whose standard-accuracy loss on the tuning folds
  stays within a budget (1, 2, 3, 10 pp); the identity (no adjustment: ΔBal 0, cost 0) is always an
  admissible candidate, so no fold is ever left out.
Logits are canonical-order (column c = option c).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from faithtests.progress import label
from faithtests.protocols.imavb.metrics import answers
from faithtests.protocols.imavb.probes import Folds, group_folds, layer_curve, peak_layer
from faithtests.protocols.imavb.records import SPLITS, VISION_SPLITS
from faithtests.scorecard.model import InsufficientData

FloatArray = NDArray[np.float64]
GAMMAS: Final = (0.5, 1.0, 2.0)
POWERS: Final = (1.0, 2.0)
ALPHAS: Final = (0.3, 0.5, 1.0)
SCALES: Final = (0.75, 1.0, 1.5)
DELTAS: Final = (5.0, 8.0, 12.0)
BUDGETS_PP: Final = (1.0, 2.0, 3.0, 10.0)
TRAIN_SHARE: Final = 0.25
N_FOLDS: Final = 5
LAYER_FOLDS: Final = 4


class GateProbe(Protocol):
    """A fitted classifier with scikit-learn's ``predict_proba`` (App. G's gate probe)."""

    def predict_proba(self, X: Any) -> Any: ...


@dataclass(frozen=True)
class PGLAConfig:
    gamma: float
    p: float
    alpha: float
    s: float
    delta: float


GRID: Final[tuple[PGLAConfig, ...]] = tuple(
    PGLAConfig(*c) for c in product(GAMMAS, POWERS, ALPHAS, SCALES, DELTAS)
)
#: No adjustment (s = δ = 0 and β = 0 leave every logit unchanged): the baseline through the same code.
IDENTITY: Final = PGLAConfig(1.0, 1.0, 0.5, 0.0, 0.0)


def sigmoid(x: ArrayLike) -> FloatArray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64))), dtype=np.float64)


def pgla_adjust(logits: ArrayLike, p_mis: ArrayLike, cfg: PGLAConfig, beta: float) -> FloatArray:
    """Eqs. 5–6 on canonical logits [..., 6] with the probe's P_mis [...] (broadcast)."""
    x = np.array(logits, dtype=np.float64)
    g = np.asarray(p_mis, dtype=np.float64) ** cfg.p
    gap = x[..., :4].max(axis=-1) - x[..., 4:].max(axis=-1)
    boost = sigmoid(cfg.gamma * (g - cfg.alpha)) * (cfg.s * gap + cfg.delta)
    x[..., 4] += boost - beta / 2.0
    x[..., 5] += boost + beta / 2.0
    return x


def pgla_beta(std_logits: ArrayLike) -> float:
    """β = mean(L_E − L_F) over standard training items (App. G)."""
    x = np.asarray(std_logits, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("pgla_beta: need [N>0, 6] logits of standard training items")
    return float((x[:, 4] - x[:, 5]).mean())


class MLPGate:
    """App. G's gate probe as fitted by :func:`train_gate_probe`: standardise, then Linear(D, 256) →
    ReLU → Linear(256, 2); ``predict_proba`` gives [P(standard), P(misleading)] (softmax)."""

    def __init__(self, scaler: Any, net: Any) -> None:
        self.scaler, self.net = scaler, net

    def predict_proba(self, X: Any) -> Any:
        import torch  # lazy: torch (this module is torch-free at import: the suite imports it at collection)

        x = torch.tensor(self.scaler.transform(np.asarray(X, dtype=np.float64)), dtype=torch.float32)
        with torch.no_grad():
            return torch.softmax(self.net(x), dim=1).double().numpy()


def train_gate_probe(X: ArrayLike, y: ArrayLike, *, seed: int = 0, epochs: int = 100) -> MLPGate:
    """The App. G gate, trained as App. G and the public ``train_probes.py`` do: StandardScaler (fit on
    these rows) → MLP(256 ReLU, two-class output), ``torch.manual_seed(seed)`` initialisation,
    cross-entropy, full-batch Adam (lr 1e-3), ``epochs`` = 100 steps, float32. The global torch RNG is
    left as it was (``fork_rng``)."""
    # lazy: torch and scikit-learn (slow imports; this module is imported by the suite at collection)
    import torch
    from sklearn.preprocessing import StandardScaler  # lazy: scikit-learn

    x = np.asarray(X, dtype=np.float64)
    scaler = StandardScaler().fit(x)
    xt = torch.tensor(scaler.transform(x), dtype=torch.float32)
    yt = torch.tensor(np.asarray(y, dtype=np.int64), dtype=torch.long)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    net.train()
    for _ in range(epochs):  # one full-batch step per epoch
        opt.zero_grad()
        loss_fn(net(xt), yt).backward()
        opt.step()
    net.eval()
    return MLPGate(scaler, net)


def _split_means(correct: ArrayLike, splits: Sequence[str]) -> dict[str, FloatArray]:
    c = np.asarray(correct, dtype=np.float64)
    sp = np.asarray([str(s) for s in splits])
    if sp.shape[0] != c.shape[-1]:
        raise ValueError(f"bal_of: {c.shape[-1]} values along the last axis, {sp.shape[0]} splits")
    unknown = set(sp.tolist()) - set(SPLITS)
    if unknown:
        raise ValueError(f"bal_of: unknown splits {sorted(unknown)}")
    return {s: np.asarray(c[..., sp == s].mean(axis=-1)) for s in SPLITS if (sp == s).any()}


def bal_of(correct: ArrayLike, splits: Sequence[str]) -> FloatArray:
    """Bal (Eq. 1) along the last axis: accuracy per split first, then ½((std_v + std_a)/2 +
    (mis_v + mis_a)/2), or ½(std_v + mis_v) with no audio split ("vision only")."""
    a = _split_means(correct, splits)
    if "standard_vision" not in a or "misleading_vision" not in a:
        raise ValueError("bal_of: Bal needs both vision splits")
    if ("standard_audio" in a) != ("misleading_audio" in a):
        raise ValueError("bal_of: give both audio splits or neither")
    if "standard_audio" in a:
        std = (a["standard_vision"] + a["standard_audio"]) / 2.0
        mis = (a["misleading_vision"] + a["misleading_audio"]) / 2.0
    else:
        std, mis = a["standard_vision"], a["misleading_vision"]
    return np.asarray(0.5 * (std + mis), dtype=np.float64)


def side_accuracy(correct: ArrayLike, splits: Sequence[str], misleading: bool) -> FloatArray:
    """Mean of the per-split accuracies on the standard (or misleading) side, along the last axis."""
    a = _split_means(correct, splits)
    side = [v for s, v in a.items() if s.startswith("misleading") == misleading]
    if not side:
        raise ValueError("side_accuracy: no split on that side")
    return np.asarray(np.mean(side, axis=0), dtype=np.float64)


def grid_correct(
    logits: ArrayLike, p_mis: ArrayLike, gold: ArrayLike, beta: float, grid: Sequence[PGLAConfig] = GRID
) -> FloatArray:
    """Correctness [G, N] of every configuration's answers; with logits [N, S, 6] (several option
    orders, canonical columns) the mean correctness over the S orders. Ties are wrong."""
    lg = np.asarray(logits, dtype=np.float64)
    g = np.asarray(gold, dtype=np.int64)
    p = np.asarray(p_mis, dtype=np.float64)
    if lg.ndim == 3:
        g, p = g[:, None], p[:, None]
    out = np.stack([(answers(pgla_adjust(lg, p, c, beta)) == g) for c in grid]).astype(np.float64)
    return out.mean(axis=2) if lg.ndim == 3 else out


def split_stimuli(
    stimuli: Sequence[object], *, share: float = TRAIN_SHARE, seed: int = 0
) -> NDArray[np.bool_]:
    """Rows whose stimulus falls in the probe-training share (all variants of a clip together)."""
    names = sorted({str(s) for s in stimuli})
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(len(names))[: _n_train(len(names), share)].tolist())
    picked = {names[i] for i in chosen}
    return np.array([str(s) in picked for s in stimuli], dtype=np.bool_)


def _n_train(n_stimuli: int, share: float = TRAIN_SHARE) -> int:
    return max(1, round(share * n_stimuli))


def pgla_min_stimuli() -> int:
    """The fewest stimuli App. G runs on: >= 2 probe-training stimuli (l*'s grouped CV) and one
    evaluation stimulus per tuning fold (7 with the 25% share and 5 folds)."""
    n = 1
    while _n_train(n) < 2 or n - _n_train(n) < N_FOLDS:
        n += 1
    return n


def _bal_gap(splits: Sequence[str]) -> str | None:
    """Why Bal (Eq. 1) and the side accuracies are undefined on rows of these splits, or None."""
    have = set(splits)
    missing = [s for s in VISION_SPLITS if s not in have]
    if missing:
        return f"no {' or '.join(missing)} rows"
    if ("standard_audio" in have) != ("misleading_audio" in have):
        return "one audio split without the other"
    return None


def check_pgla_data(splits: Sequence[str], stimuli: Sequence[object], *, seed: int = 0) -> None:
    """Raise :class:`InsufficientData` (the reason in plain words) when App. G cannot run on these rows:
    fewer than :func:`pgla_min_stimuli` stimuli, probe-training rows without both labels (the gate probe
    and l*'s CV need both, β the standard ones), or evaluation rows on which Bal is undefined. The
    per-fold conditions are checked where the folds are drawn (``group_folds``, :func:`pgla_cv`)."""
    n, need = len({str(s) for s in stimuli}), pgla_min_stimuli()
    if n < need:
        raise InsufficientData(
            f"PGLA needs >= {need} stimuli ({_n_train(need)} to train the gate probe and choose l*, one per "
            f"fold of the {N_FOLDS}-fold tuning), got {n}"
        )
    train = split_stimuli(stimuli, seed=seed)
    sp = np.asarray([str(s) for s in splits])
    labels = {s.startswith("misleading") for s in sp[train].tolist()}
    if len(labels) < 2:
        only = "misleading" if True in labels else "standard"
        raise InsufficientData(
            f"PGLA's probe-training stimuli need standard and misleading rows, got {only} rows only"
        )
    gap = _bal_gap(sp[~train].tolist())
    if gap:
        raise InsufficientData(f"PGLA's evaluation rows need both vision splits for Bal (Eq. 1), got {gap}")


def _split_codes(splits: Sequence[str]) -> NDArray[np.int64]:
    return np.array([SPLITS.index(s) for s in splits], dtype=np.int64)


def pgla_layer(
    states: ArrayLike, splits: Sequence[str], stimuli: Sequence[object], *, seed: int = 0
) -> tuple[int, tuple[float, ...]]:
    """l* for PGLA and its per-layer curve: the logistic probe's 4-fold CV accuracy (§4.3, grouped by
    stimulus) on the probe-training stimuli only (:func:`split_stimuli`); ``states`` [L, N, D]."""
    check_pgla_data(splits, stimuli, seed=seed)
    s = np.asarray(states)
    tr = np.flatnonzero(split_stimuli(stimuli, seed=seed))
    y = np.array([str(splits[int(i)]).startswith("misleading") for i in tr], dtype=np.int64)
    st = [stimuli[int(i)] for i in tr]
    n_groups = len({str(x) for x in st})  # >= 2 (check_pgla_data)
    folds = group_folds(y, st, n_splits=min(LAYER_FOLDS, n_groups), seed=seed, what="PGLA's choice of l*")
    with label("PGLA"):  # names layer_curve's progress stage
        accs = tuple(r.accuracy for r in layer_curve(s[:, tr], y, folds, seed=seed))
    return peak_layer(accs), accs


def pgla_gate(states: ArrayLike, layer: int, splits: Sequence[str], stimuli: Sequence[object], *,
              seed: int = 0) -> GateProbe:
    """The App. G gate probe (:func:`train_gate_probe`) on ``states[layer]`` of the probe-training
    stimuli (:func:`split_stimuli`), labelled misleading or not."""
    check_pgla_data(splits, stimuli, seed=seed)
    h = np.asarray(np.asarray(states)[layer], dtype=np.float64)
    tr = np.flatnonzero(split_stimuli(stimuli, seed=seed))
    mis = np.array([str(splits[int(i)]).startswith("misleading") for i in tr], dtype=np.bool_)
    probe: GateProbe = train_gate_probe(h[tr], mis, seed=seed)
    return probe


@dataclass(frozen=True)
class ParetoRow:
    """One budget of Table 11, means over the held-out folds (every fold counts: the identity is an
    admissible candidate); ``identity_folds`` = folds where the identity was chosen (no configuration
    within the budget had a higher tuning Bal)."""

    delta_bal: float
    std: float
    mis: float
    identity_folds: int


@dataclass(frozen=True)
class PGLAResult:
    """Held-out outcome of the App. G protocol on the 75% evaluation rows (``eval_rows``)."""

    layer: int  # l*, chosen on the probe-training stimuli
    layer_accuracy: tuple[float, ...]  # that CV curve (train stimuli only)
    eval_rows: NDArray[np.int64]
    fold_of: NDArray[np.int64]  # fold per eval row
    configs: tuple[PGLAConfig, ...]  # tuned configuration per fold (unconstrained)
    p_mis: FloatArray  # gate probe P_mis per eval row
    beta: float
    probe_accuracy: float  # gate probe accuracy on the eval rows
    base_correct: FloatArray  # per eval row (mean over orders when several)
    pgla_correct: FloatArray  # per eval row, its fold's configuration
    pareto: dict[float, ParetoRow]  # budget pp -> row
    tune_test_gap: float  # mean over folds of tuned Bal (tuning folds) − held-out Bal

    def adjusted(self, logits: ArrayLike) -> FloatArray:
        """Eqs. 5–6 with each eval row's held-out configuration on ``logits`` [n_eval, ..., 6] (the
        evaluation rows' logits, any number of orders): the ``pgla`` variant computed offline."""
        lg = np.asarray(logits, dtype=np.float64)
        out = np.empty_like(lg)
        for j, f in enumerate(self.fold_of):
            out[j] = pgla_adjust(lg[j], self.p_mis[j], self.configs[int(f)], self.beta)
        return out


def _tuning_folds(ev_sp: list[str], ev_stimuli: list[object], seed: int) -> Folds:
    """App. G's 5-fold split of the evaluation rows by stimulus; every fold's tuning and held-out rows
    need both vision splits for Bal (Eq. 1), else :class:`InsufficientData`."""
    folds = group_folds(_split_codes(ev_sp), ev_stimuli, n_splits=N_FOLDS, seed=seed, what="PGLA's tuning")
    for k, (tu, te) in enumerate(folds, 1):
        for part, idx in (("tuning", tu), ("held-out", te)):
            gap = _bal_gap([ev_sp[int(i)] for i in idx])
            if gap:
                raise InsufficientData(f"PGLA's {N_FOLDS}-fold tuning needs both vision splits in every fold "
                                       f"for Bal (Eq. 1), got {gap} in fold {k}'s {part} rows")
    return folds


#: One fold under one budget: (ΔBal held out, standard accuracy, misleading accuracy, identity chosen).
_BudgetRow = tuple[float, float, float, bool]


def _budget_rows(corr: FloatArray, base: FloatArray, tune_bal: FloatArray, tu: NDArray[np.int64],
                 te: NDArray[np.int64], sp_tu: list[str], sp_te: list[str]) -> dict[float, _BudgetRow]:
    """Table 11 on one fold: under each standard-accuracy budget, the configuration of highest tuning Bal
    whose tuning standard-accuracy loss stays within it, scored on the held-out rows."""
    loss_pp = 100.0 * (side_accuracy(base[tu], sp_tu, False) - side_accuracy(corr[:, tu], sp_tu, False))
    base_te = float(bal_of(base[te], sp_te))
    out: dict[float, _BudgetRow] = {}
    for b in BUDGETS_PP:
        ok = np.flatnonzero(loss_pp <= b)
        # the identity (tuned Bal of the base, cost 0) is admissible under every budget
        ident = ok.size == 0 or float(tune_bal[ok].max()) <= float(bal_of(base[tu], sp_tu))
        te_c = base[te] if ident else corr[int(ok[np.argmax(tune_bal[ok])]), te]
        out[b] = (float(bal_of(te_c, sp_te)) - base_te, float(side_accuracy(te_c, sp_te, False)),
                  float(side_accuracy(te_c, sp_te, True)), ident)
    return out


def _pareto(rows: dict[float, list[_BudgetRow]]) -> dict[float, ParetoRow]:
    """Per budget, the means over folds (identity folds counted)."""
    return {b: ParetoRow(float(np.mean([r[0] for r in v])), float(np.mean([r[1] for r in v])),
                         float(np.mean([r[2] for r in v])), int(sum(r[3] for r in v)))
            for b, v in rows.items()}


@dataclass(frozen=True)
class _Tuned:
    """The cross-fitted tuning of App. G on the evaluation rows."""

    fold_of: NDArray[np.int64]
    configs: tuple[PGLAConfig, ...]
    after: FloatArray
    gaps: list[float]
    pareto: dict[float, ParetoRow]


def _tune(corr: FloatArray, base: FloatArray, folds: Folds, ev_sp: list[str]) -> _Tuned:
    """Per fold: the grid configuration of highest Bal on the tuning rows, applied to the held-out rows;
    its tune − test Bal gap; and the budgeted choices of Table 11."""
    fold_of = np.zeros(len(ev_sp), dtype=np.int64)
    chosen: list[PGLAConfig] = []
    after = np.zeros(len(ev_sp), dtype=np.float64)
    gaps: list[float] = []
    rows: dict[float, list[_BudgetRow]] = {b: [] for b in BUDGETS_PP}
    for f, (tu, te) in enumerate(folds):
        fold_of[te] = f
        sp_tu, sp_te = [ev_sp[int(i)] for i in tu], [ev_sp[int(i)] for i in te]
        tune_bal = bal_of(corr[:, tu], sp_tu)
        best = int(np.argmax(tune_bal))
        chosen.append(GRID[best])
        after[te] = corr[best, te]
        gaps.append(float(tune_bal[best] - bal_of(corr[best, te], sp_te)))
        for b, row in _budget_rows(corr, base, tune_bal, tu, te, sp_tu, sp_te).items():
            rows[b].append(row)
    return _Tuned(fold_of, tuple(chosen), after, gaps, _pareto(rows))


def pgla_cv(
    states: ArrayLike,
    logits: ArrayLike,
    gold: ArrayLike,
    splits: Sequence[str],
    stimuli: Sequence[object],
    *,
    beta_logits: ArrayLike | None = None,
    layer: tuple[int, tuple[float, ...]] | None = None,
    gate: GateProbe | None = None,
    seed: int = 0,
) -> PGLAResult:
    """App. G end to end on one model: ``states`` [L, N, D] (l* is chosen on the probe-training
    stimuli), canonical ``logits`` [N, 6] (one option order, the paper's Table 4) or [N, S, 6] (several:
    correctness averaged over them, tuned for the shuffled metric the suite reports). β comes from
    ``beta_logits`` ([N, 6] or [N, S, 6]; default ``logits``, the orders the adjustment applies to);
    ``layer`` is :func:`pgla_layer`'s answer and ``gate`` :func:`pgla_gate`'s at that layer when
    already computed (same states, stimuli and seed): both order protocols share them; only β and the
    tuning differ."""
    check_pgla_data(splits, stimuli, seed=seed)
    lg = np.asarray(logits, dtype=np.float64)
    bl = lg if beta_logits is None else np.asarray(beta_logits, dtype=np.float64)
    l_star, curve = pgla_layer(states, splits, stimuli, seed=seed) if layer is None else layer
    h = np.asarray(np.asarray(states)[l_star], dtype=np.float64)
    gd = np.asarray(gold, dtype=np.int64)
    sp = [str(s) for s in splits]
    mis = np.array([s.startswith("misleading") for s in sp], dtype=np.bool_)
    train = split_stimuli(stimuli, seed=seed)
    tr, ev = np.flatnonzero(train), np.flatnonzero(~train)
    probe = pgla_gate(states, l_star, splits, stimuli, seed=seed) if gate is None else gate
    beta = pgla_beta(bl[tr][~mis[tr]].reshape(-1, 6))
    p = np.asarray(probe.predict_proba(h[ev])[:, 1], dtype=np.float64)
    ev_sp = [sp[int(i)] for i in ev]
    folds = _tuning_folds(ev_sp, [stimuli[int(i)] for i in ev], seed)
    corr = grid_correct(lg[ev], p, gd[ev], beta)  # [G, n_eval]
    base = grid_correct(lg[ev], p, gd[ev], 0.0, (IDENTITY,))[0]
    tuned = _tune(corr, base, folds, ev_sp)
    return PGLAResult(
        layer=l_star,
        layer_accuracy=curve,
        eval_rows=ev.astype(np.int64),
        fold_of=tuned.fold_of,
        configs=tuned.configs,
        p_mis=p,
        beta=beta,
        probe_accuracy=float(((p >= 0.5) == mis[ev]).mean()),
        base_correct=base,
        pgla_correct=tuned.after,
        pareto=tuned.pareto,
        tune_test_gap=float(np.mean(tuned.gaps)),
    )
