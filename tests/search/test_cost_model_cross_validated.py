"""The cost model scored out of fold on one run's trials (``cost_model_train.cross_validated``):
which rows each fold's model is fitted on, the figures, and when there is no figure."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pytest

from autotune.search.cost_model import CostModel, XGBoostModel
from autotune.search.cost_model_train import CV_FOLDS, cross_validated
from autotune.search.features import FEATURE_NAMES
from autotune.search.rank_scores import spearman, top_k, top_k_recall


class FirstColumn(CostModel):
    """Predicts a row's first column; remembers the second column (a row id) of every row fitted on."""

    name = "test-first-column"
    fits: ClassVar[list[set[int]]] = []

    def __init__(self, ready: bool = True) -> None:
        super().__init__(0)
        self._ready = ready

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        FirstColumn.fits.append({int(i) for i in X[:, 1]})

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X[:, 0], dtype=float)

    @property
    def predicts_ms(self) -> bool:
        return True

    @property
    def ready(self) -> bool:
        return self._ready


def rows(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` rows: a prediction, a row id; latencies; every fifth row a cutoff one."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(1.0, 10.0, n)
    X = np.column_stack([y + rng.normal(0.0, 2.0, n), np.arange(n)])
    ok = np.arange(n) % 5 != 4
    return X, y, ok


def test_each_fold_is_predicted_by_a_model_fitted_on_every_other_row() -> None:
    X, y, ok = rows(30)
    FirstColumn.fits = []
    quality = cross_validated(FirstColumn, X, y, ok, seed=7)
    assert quality is not None and len(FirstColumn.fits) == CV_FOLDS
    ok_ids, cutoff_ids = set(np.flatnonzero(ok).tolist()), set(np.flatnonzero(~ok).tolist())
    held_out = [ok_ids - fitted for fitted in FirstColumn.fits]
    assert all(cutoff_ids <= fitted for fitted in FirstColumn.fits)  # cutoff rows train every fold
    assert sorted(len(h) for h in held_out) == [6, 6, 6, 6]  # 24 ok rows in 4 folds
    assert set().union(*held_out) == ok_ids and sum(map(len, held_out)) == len(ok_ids)  # each once
    # the figures are those of the ok rows' predictions against their latencies
    k = top_k(24)
    assert quality == {
        "trials": 24.0, "folds": 4.0, "spearman": spearman(X[ok, 0], y[ok]),
        "recall": top_k_recall(X[ok, 0], y[ok], k), "k": float(k),
    }  # fmt: skip


def test_the_folds_follow_the_seed() -> None:
    X, y, ok = rows(30)
    folds = []
    for seed in (7, 7, 8):
        FirstColumn.fits = []
        cross_validated(FirstColumn, X, y, ok, seed=seed)
        folds.append(FirstColumn.fits)
    assert folds[0] == folds[1] and folds[0] != folds[2]


def test_no_figure_with_too_few_ok_rows_or_a_model_that_is_not_ready() -> None:
    X, y, ok = rows(10)  # 8 ok rows: two per fold
    assert cross_validated(FirstColumn, X, y, ok) is not None
    ok[0] = False
    assert cross_validated(FirstColumn, X, y, ok) is None  # 7 ok rows for 4 folds
    X, y, ok = rows(30)
    assert cross_validated(lambda: FirstColumn(ready=False), X, y, ok) is None


def test_bad_arguments_are_refused() -> None:
    X, y, ok = rows(12)
    with pytest.raises(ValueError, match="expected 2 or more folds, got 1"):
        cross_validated(FirstColumn, X, y, ok, folds=1)
    with pytest.raises(ValueError, match="12 rows, 11 latencies, 12 ok flags"):
        cross_validated(FirstColumn, X, y[:-1], ok)


def test_the_xgboost_model_orders_latencies_its_features_explain_and_not_others() -> None:
    """Latencies that the roofline estimate's column follows (up to 10% noise) are ordered out of
    fold; the same latencies dealt to other rows are not."""
    rng = np.random.default_rng(3)
    n = 48
    y = np.exp(rng.uniform(0.0, 4.0, n))
    X = rng.uniform(0.0, 1.0, (n, len(FEATURE_NAMES)))
    X[:, FEATURE_NAMES.index("log2_estimate_ns")] = np.log2(y * 1e6) + rng.normal(0.0, 0.14, n)
    ok = np.ones(n, dtype=bool)
    explained = cross_validated(lambda: XGBoostModel(seed=0), X, y, ok)
    shuffled = cross_validated(lambda: XGBoostModel(seed=0), X, rng.permutation(y), ok)
    assert explained is not None and shuffled is not None
    assert explained["spearman"] > 0.9 and explained["recall"] >= 0.6
    assert math.isfinite(shuffled["spearman"]) and abs(shuffled["spearman"]) < 0.4
