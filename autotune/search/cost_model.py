"""Cost models: rank candidates by their features, to choose what to measure.

A :class:`CostModel` is fitted on the features (:mod:`autotune.search.features`)
of the measured ``ok`` trials and their median latencies, and predicts a cost per
unmeasured candidate, lower for a faster one. Until it is ready (fitted on
``min_samples`` trials, or loaded from a pretrained file; never for ``"none"``) a model
with a roofline prior orders candidates by that estimate alone (an order, not
milliseconds: the first round measures the candidates the estimate takes to be
fastest, plus the ``epsilon`` share at random); one without predicts NaN, and the
tuner then picks candidates at random (seeded).

Models are registered by name, so the YAML says ``cost_model: xgboost`` (or
``cost_model: {kind: xgboost, pretrained: model.json}``)::

    model = make_cost_model("xgboost", seed=0)
    model.fit(X, latency_ms)        # groups=: one id per row when rows come from several workloads;
                                    # weights=: how much each row counts (the regression's line and trees)
    model.predict(X_new)            # ms once fitted on a run's trials; NaN until ready

- ``"xgboost"`` (:class:`XGBoostModel`): log latency = a line of the roofline estimate (feature
  ``log2_estimate_ns``, :func:`~autotune.search.features_roofline.roofline`) + boosted trees on
  the features for what the estimate misses (:class:`Settings`). The line's slope is fitted with
  a prior of 16 trials' worth at slope 1 and its intercept is the median, so a few trials timed
  far off (a busy machine) pull it little; the trees (100 of depth 2, eta 0.1, pseudo-Huber loss,
  32 histogram bins, one thread) fit what the line leaves, and their correction counts
  ``n / (n + 30)`` after ``n`` trials: with the 8 to 16 trials of a run's first rounds the model
  ranks mostly by the estimate, and the trials take over as they add up. Each workload has its
  own intercept; a model trained on several workloads' logs ranks a new one's candidates by the
  estimate's line with the slope fitted there, its trees counting once the run's trials are fitted.
  Needs 4 trials; predicts milliseconds once fitted on one run's trials (which the tuner records
  and report.md scores). Measured on the logs of earlier runs, each trial predicted by the model
  fitted on the rounds before it, and each workload's trials by a model fitted on the others:
  ``results/cost_model_heldout.md`` (``experiments/cost_model_heldout.py``, 67 logs). There,
  other settings (depth 3; 300 trees at eta 0.03; min_child_weight 4; ``tree_trials`` 10 to 60;
  ``prior_weight`` 2 to 64; Huber slope 0.5 or none) moved the median Spearman of the trials
  predicted by 0.03 or less, the logs ranked better about as many as those ranked worse (the
  means within 0.01). Fitting each trial's fastest timed run instead of its median (scored
  against the median) ranked 42 logs better and 25 worse, the median unchanged. A model fitted
  on other workloads ranks by the estimate alone: counting their trees ranked new workloads worse.
  ``weights`` (one per row) make some trials count less in the line's slope and the trees.
  :class:`Settings` also
  offers the pairwise ranking objective (``rank:pairwise``, labels ``-log(ms / fastest ms of the
  workload)``, scores turned into milliseconds by a line fitted to ``log(ms)``). A ``pretrained``
  model file (:func:`~autotune.search.cost_model_file.save_model`, written by ``autotune train-cost-model``) ranks the first round
  by the estimate's line with the slope fitted on its logs (the same order as the estimate alone
  while that slope is positive); its trees count once the run's own trials are fitted, which add
  trees to it.
- ``"none"`` (:class:`NoModel`): no ranking; the tuner measures its feasible candidates at random.

:mod:`autotune.search.rank_scores` says how well predictions order measured latencies (the
report's "Cost model" section and the training command use it); :mod:`autotune.search.cost_model_file`
writes and reads model files.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError
from .cost_model_file import load_model
from .rank_scores import ranks

__all__ = [
    "COST_MODELS",
    "CostModel",
    "NoModel",
    "Settings",
    "XGBoostModel",
    "make_cost_model",
    "register_cost_model",
]


class CostModel(ABC):
    """Predicts latency (ms) from feature rows. ``ranks`` False: the tuner measures at random."""

    name: ClassVar[str]
    ranks: ClassVar[bool] = True
    min_samples: ClassVar[int] = 0

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    @abstractmethod
    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """Fit on rows ``X`` (``n x features``) and latencies ``y`` (ms, > 0), compared only within
        a group (``groups``: one workload id per row; None: one workload), each row counting
        ``weights`` (> 0; None: 1 each); replaces any earlier fit."""

    @abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        """A cost per row of ``X``, lower for a faster candidate (ms when :attr:`predicts_ms`);
        while the model is not ready, NaN for every row or an order it has without trials (the
        roofline estimate's, for a model with that prior)."""

    @property
    def predicts_ms(self) -> bool:
        """Whether :meth:`predict` gives milliseconds (else only an order)."""
        return False

    @property
    @abstractmethod
    def ready(self) -> bool:
        """Whether :meth:`predict` gives useful numbers (fitted on ``min_samples`` rows or more)."""


COST_MODELS: dict[str, type[CostModel]] = {}


def register_cost_model(cls: type[CostModel]) -> type[CostModel]:
    """Class decorator: make ``cls`` available to :func:`make_cost_model` as ``cls.name``."""
    if cls.name in COST_MODELS:
        raise ValueError(f"cost model {cls.name!r} is registered twice")
    COST_MODELS[cls.name] = cls
    return cls


def make_cost_model(name: str, seed: int = 0, pretrained: str | os.PathLike[str] | None = None) -> CostModel:
    """The cost model registered as ``name``, seeded, starting from the ``pretrained`` model file
    if given (ConfigError naming the file when it is not one, or was trained on other features)."""
    cls = COST_MODELS.get(name)
    if cls is None:
        raise ConfigError(f"unknown cost model {name!r}; known cost models: {', '.join(sorted(COST_MODELS))}")
    if pretrained is None:
        return cls(seed=seed)
    if cls is not XGBoostModel:
        raise ConfigError(f"search.cost_model: a {name!r} model cannot start from a pretrained file")
    return XGBoostModel(seed=seed, pretrained=pretrained)


def _check_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(f"cost model: expected X of n rows and y of n values, got {X.shape} and {y.shape}")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("cost model: latencies must be finite and > 0")
    return X, y


def _check_weights(weights: np.ndarray | None, n: int) -> np.ndarray | None:
    """``weights`` as floats, one finite value > 0 per row (ValueError otherwise); None stays None."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"cost model: expected {n} finite weights > 0, got shape {w.shape}")
    return w


@register_cost_model
class NoModel(CostModel):
    """No model: predicts NaN, so the tuner measures its feasible candidates at random."""

    name = "none"
    ranks = False

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        _check_xy(X, y)
        _check_weights(weights, len(y))

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), np.nan)

    @property
    def ready(self) -> bool:
        return False


@dataclass(frozen=True)
class Settings:
    """How :class:`XGBoostModel` learns (see the module docstring); the defaults are the model's."""

    objective: str = "reg:squarederror"
    """``reg:squarederror``: trees fit log latency less the prior; ``rank:pairwise``: trees order
    pairs of one workload's candidates (labels ``-log(ms / fastest ms)``), and a line fitted to
    ``log(ms)`` turns their scores into milliseconds."""
    rounds: int = 100
    max_depth: int = 2
    eta: float = 0.1
    min_child_weight: float = 1.0
    max_bin: int = 32
    prior: str | None = "log2_estimate_ns"
    """The feature (a log2 time estimate) whose line is the regression's starting point; None: each
    workload's typical log latency alone."""
    prior_weight: float = 16.0
    """How many trials' worth of belief the line's slope starts with at 1 (the estimate taken as
    it is): the slope fitted on ``n`` trials moves from 1 towards theirs as they add up."""
    tree_trials: float = 30.0
    """The trees' correction counts ``n / (n + tree_trials)`` after a fit on ``n`` trials of the
    workload ranked: the blend of estimate and trees leans on the estimate while the trials are
    few, and a model fitted on other workloads ranks a new one by the estimate's line alone until
    it is fitted on the run's trials (0: trees in full)."""
    labels: str = "log"
    """What the regression fits per workload: ``log`` latency, or ``rank``: the log latencies'
    order laid on a normal curve with their median and spread (:func:`_labels`), so that a trial
    timed a hundred times too slow (a descheduled time slice) counts as the slowest, not as far off."""
    huber: float = 1.0
    """Above 0: the trees fit log latency with the pseudo-Huber loss of this slope, and the line's
    intercept is the median, so that a few trials timed far off (a busy machine) pull little."""


def _tree_share(n: int, tree_trials: float) -> float:
    """How much the trees' correction counts after a fit on ``n`` trials of the workload ranked
    (0 for a model fitted on other workloads: their trees fit what the estimate missed there)."""
    return 1.0 if tree_trials <= 0 else n / (n + tree_trials)


def _labels(z: np.ndarray, groups_of: Sequence[np.ndarray], kind: str) -> np.ndarray:
    """The regression's labels from log latencies ``z`` (see :attr:`Settings.labels`): per workload
    (a mask of ``groups_of``) with ``rank``, the normal quantile of each trial's rank (ties at their
    mean), scaled by the workload's interquartile range of ``z`` over that of a normal curve and
    centred on its median."""
    if kind == "log":
        return z
    if kind != "rank":
        raise ValueError(f"cost model: unknown labels {kind!r} (log, rank)")
    out = z.copy()
    normal = NormalDist()
    for g in groups_of:
        n = int(g.sum())
        if n < 3:
            continue
        q = np.array([normal.inv_cdf((r - 0.5) / n) for r in ranks(z[g])])
        spread = float(np.subtract(*np.percentile(z[g], [75, 25]))) / 1.349
        out[g] = float(np.median(z[g])) + spread * q
    return out


def _prior_line(
    p: np.ndarray, z: np.ndarray, weight: float, w: np.ndarray | None = None
) -> tuple[float, float]:
    """``(intercept, slope)`` of ``z ~ p`` (each point counting ``w``; None: 1), its slope shrunk
    towards 1 by ``weight`` pseudo-trials (in units of ``p``'s own spread) and never below 0."""
    w = np.ones(len(p)) if w is None else w
    total = float(w.sum())
    p_mean = float(w @ p) / total if total > 0 else 0.0
    z_mean = float(w @ z) / total if total > 0 else 0.0
    pc, zc = p - p_mean, z - z_mean
    sxx = float((w * pc) @ pc)
    spread = sxx / total if total > 0 else 0.0
    prior = weight * (spread if spread > 0 else 1.0)
    slope = max((float((w * pc) @ zc) + prior) / (sxx + prior), 0.0)
    return z_mean - slope * p_mean, slope


@register_cost_model
class XGBoostModel(CostModel):
    """Boosted trees on the features, over a prior from the roofline estimate (see the module docstring).

    It uses xgboost's native ``train``/``Booster`` API, which does not need scikit-learn.
    """

    name = "xgboost"
    min_samples = 4
    SETTINGS = Settings()

    def __init__(
        self,
        seed: int = 0,
        pretrained: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        features: Sequence[str] | None = None,
    ) -> None:
        """``features``: the names of the columns of ``X`` (:data:`~autotune.search.features.FEATURE_NAMES`
        unless given: an experiment may fit on some of them)."""
        from .features import FEATURE_NAMES

        super().__init__(seed)
        self.settings = settings or self.SETTINGS
        self.features = tuple(features or FEATURE_NAMES)
        self._base: Any = None
        self._slope = 0.0  # of the prior, when the regression fits several workloads
        if pretrained is not None:
            self._base, meta = load_model(pretrained)
            self.settings = _settings_of(meta, pretrained)
            self._slope = float(meta.get("prior_slope", 0.0))
        prior = self.settings.prior
        self._prior = self.features.index(prior) if prior is not None and prior in self.features else None
        self._model: Any = None
        self._line: tuple[float, float] | None = None  # log(ms) = a + b * (prior or score)
        self._single = False
        self._weight = self._share(0)  # a file's trees: of other workloads

    def _share(self, n: int) -> float:
        """:func:`_tree_share` with a prior; without one the trees are the whole model."""
        return _tree_share(n, self.settings.tree_trials) if self._prior is not None else 1.0

    def _margin_feature(self, X: np.ndarray) -> np.ndarray:
        """The prior's estimate (natural log); zeros without a prior, or for rows of other columns."""
        if self._prior is None or X.shape[1] != len(self.features):
            return np.zeros(len(X))
        return X[:, self._prior] * math.log(2.0)

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        X, y = _check_xy(X, y)
        w = _check_weights(weights, len(y))
        self._model, self._line = None, None
        if len(y) < self.min_samples:
            return
        import xgboost

        g = np.zeros(len(y), dtype=np.int64) if groups is None else np.asarray(groups)
        if g.shape != y.shape:
            raise ValueError(f"cost model: expected one group per row, got {g.shape} for {y.shape}")
        _, qid = np.unique(g, return_inverse=True)
        self._single = int(qid.max()) == 0
        s = self.settings
        objective = "reg:pseudohubererror" if s.huber > 0 and s.objective.startswith("reg:") else s.objective
        params = {
            "objective": objective, "max_depth": s.max_depth, "max_bin": s.max_bin, "eta": s.eta,
            "min_child_weight": s.min_child_weight, "tree_method": "hist", "nthread": 1, "verbosity": 0,
            "seed": self.seed, **({"base_score": 0.0} if s.objective.startswith("reg:") else {}),
            **({"huber_slope": s.huber} if objective == "reg:pseudohubererror" else {}),
        }  # fmt: skip
        if s.objective == "rank:pairwise":
            if w is not None:
                raise ValueError("cost model: rank:pairwise is fitted without weights")
            order = np.argsort(qid, kind="stable")  # xgboost wants each query's rows together
            best = np.array([y[qid == q].min() for q in range(qid.max() + 1)])
            label = -np.log(y / best[qid])
            data = xgboost.DMatrix(X[order], label=label[order], qid=qid[order], nthread=1)
            self._model = xgboost.train(params, data, num_boost_round=s.rounds, xgb_model=self._base)
            if self._single:
                score = self._scores(X, None)
                if np.ptp(score) > 0:
                    slope, intercept = np.polyfit(score, np.log(y), 1)
                    if slope < 0:  # a higher score is faster: only then does the line keep the order
                        self._line = (float(intercept), float(slope))
            return
        p = self._margin_feature(X)
        groups_of = [qid == q for q in range(qid.max() + 1)]
        z = _labels(np.log(y), groups_of, s.labels)
        zc = z - np.array([z[g].mean() for g in groups_of])[qid]  # each workload's about its mean
        pc = p - np.array([p[g].mean() for g in groups_of])[qid]
        _, slope = _prior_line(pc, zc, s.prior_weight, w) if self._prior is not None else (0.0, 0.0)
        centre = np.median if s.huber > 0 else np.mean
        offsets = np.array([centre(z[g] - slope * p[g]) for g in groups_of])
        margin = offsets[qid] + slope * p
        data = xgboost.DMatrix(X, label=z, base_margin=margin, weight=w, nthread=1)
        self._model = xgboost.train(params, data, num_boost_round=s.rounds, xgb_model=self._base)
        self._slope, self._weight = slope, self._share(len(y) if self._single else 0)
        if self._single:
            self._line = (float(offsets[0]), float(slope))

    def _scores(self, X: np.ndarray, margin: np.ndarray | None) -> np.ndarray:
        import xgboost

        booster = self._model if self._model is not None else self._base
        data = xgboost.DMatrix(X, base_margin=margin, nthread=1)
        return np.asarray(booster.predict(data), dtype=np.float64)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if not self.ready:
            if self._prior is None or X.shape[1] != len(self.features):
                return np.full(len(X), np.nan)
            return np.exp(np.clip(self._margin_feature(X), -50.0, 50.0))  # the estimate's order
        if len(X) == 0:
            return np.zeros(0)
        if self.settings.objective == "rank:pairwise":
            score = self._scores(X, None)
            if self._line is None:
                return np.exp(-np.clip(score, -50.0, 50.0))  # an order, not milliseconds
            a, b = self._line
            return np.exp(np.clip(a + b * score, -50.0, 50.0))
        a, b = self._line if self._line is not None else (0.0, self._slope)
        margin = a + b * self._margin_feature(X)
        trees = self._scores(X, margin) - margin
        return np.exp(np.clip(margin + self._weight * trees, -50.0, 50.0))

    @property
    def ready(self) -> bool:
        return self._model is not None or self._base is not None

    @property
    def predicts_ms(self) -> bool:
        return self._line is not None and self._model is not None

    @property
    def prior_slope(self) -> float:
        """The slope of log latency on the prior's estimate (natural logs) of the last fit."""
        return self._slope

    @property
    def booster(self) -> Any:
        """The fitted xgboost Booster (None before a fit)."""
        return self._model


def _settings_of(meta: Mapping[str, Any], path: str | os.PathLike[str]) -> Settings:
    """The settings a model file was trained with; ConfigError naming the file when it has none."""
    given = meta.get("settings")
    try:
        return (
            Settings(**given)
            if isinstance(given, dict)
            else Settings(objective=str(meta["objective"]), prior=None)
        )
    except (TypeError, KeyError) as exc:
        raise ConfigError(f"{path}: search.cost_model.pretrained: unknown model settings ({exc})") from None
