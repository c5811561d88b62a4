"""The regression model's prior: the line from the roofline estimate to log latency, its slope
shrunk towards 1 while the trials are few, and the trees that correct it as they add up."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from autotune.search.cost_model import Settings, XGBoostModel, _prior_line
from autotune.search.cost_model_file import load_model, save_model
from autotune.search.features import FEATURE_NAMES
from autotune.search.rank_scores import spearman

N = len(FEATURE_NAMES)
PRIOR = FEATURE_NAMES.index("log2_estimate_ns")


def rows(estimate_log2: np.ndarray, seed: int = 0) -> np.ndarray:
    """Rows of noise but for the estimate's column."""
    X = np.random.default_rng(seed).random((len(estimate_log2), N))
    X[:, PRIOR] = estimate_log2
    return X


def test_the_slope_starts_at_one_and_moves_to_the_data() -> None:
    p = np.array([0.0, 1.0, 2.0, 3.0])
    z = 3.0 * p + 5.0  # the trials say 3
    assert _prior_line(p, z, 0.0) == pytest.approx((5.0, 3.0))  # no belief: least squares
    # belief of 4 trials at slope 1 (in units of p's spread, 1.25) against 4 trials at slope 3:
    # (sum pc*zc + 4 * 1.25) / (sum pc^2 + 4 * 1.25) = (15 + 5) / (5 + 5) = 2
    intercept, slope = _prior_line(p, z, 4.0)
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(z.mean() - 2.0 * p.mean())
    assert _prior_line(p, -z, 0.0)[1] == 0.0  # never below 0: a slower estimate is never faster
    assert _prior_line(np.ones(4), z, 4.0)[1] == pytest.approx(1.0)  # no spread: the prior's slope


def test_without_trees_it_predicts_the_line_in_milliseconds() -> None:
    est = np.array([10.0, 11.0, 12.0, 13.0, 14.0])
    y = np.exp(est * math.log(2.0)) * 1e-6  # exactly the estimate (ns -> ms)
    model = XGBoostModel(seed=0, settings=Settings(rounds=0, prior_weight=0.0))
    model.fit(rows(est), y)
    assert model.predicts_ms and model.prior_slope == pytest.approx(1.0)
    new = np.array([10.5, 12.5])
    assert model.predict(rows(new, seed=1)) == pytest.approx(np.exp(new * math.log(2.0)) * 1e-6, rel=1e-6)


def test_before_any_trial_it_orders_by_the_estimate_alone() -> None:
    est = np.array([14.0, 10.0, 12.5, 11.0])
    model = XGBoostModel(seed=0)
    assert not model.ready and not model.predicts_ms
    out = model.predict(rows(est))
    assert list(np.argsort(out)) == [1, 3, 2, 0]  # the estimate's order: an order, not milliseconds
    assert out == pytest.approx(np.exp(est * math.log(2.0)))
    model.fit(rows(est[:3]), np.ones(3))  # fewer trials than min_samples: still the estimate
    assert not model.ready and list(np.argsort(model.predict(rows(est)))) == [1, 3, 2, 0]
    # without the prior's column (or without a prior) nothing orders them: NaN, measured at random
    assert np.isnan(model.predict(np.zeros((2, 5)))).all()
    assert np.isnan(XGBoostModel(seed=0, settings=Settings(prior=None)).predict(rows(est))).all()


def test_few_trials_follow_the_estimate_where_the_features_say_nothing() -> None:
    rng = np.random.default_rng(3)
    est = rng.uniform(10, 16, 6)
    y = np.exp(0.8 * est * math.log(2.0) + 0.05 * rng.standard_normal(6))
    model = XGBoostModel(seed=0)
    model.fit(rows(est, seed=2), y)
    new = rng.uniform(10, 16, 30)
    assert spearman(model.predict(rows(new, seed=4)), new) > 0.95


def test_trees_correct_what_the_estimate_misses() -> None:
    rng = np.random.default_rng(5)
    est = rng.uniform(10, 16, 60)
    X = rows(est, seed=6)
    y = np.exp(est * math.log(2.0) - 3.0 * X[:, 0])  # the first feature makes it up to 20x faster
    model = XGBoostModel(seed=0)
    model.fit(X, y)
    Xt = rows(rng.uniform(10, 16, 40), seed=7)
    yt = np.exp(Xt[:, PRIOR] * math.log(2.0) - 3.0 * Xt[:, 0])
    line_only = np.exp(Xt[:, PRIOR])
    assert spearman(model.predict(Xt), yt) > spearman(line_only, yt) + 0.05


def test_several_workloads_rank_by_the_shared_slope(tmp_path: Path) -> None:
    est = np.tile(np.arange(10.0, 18.0), 2)
    y = np.exp(est * math.log(2.0)) * np.repeat([1.0, 1000.0], 8)  # two scales, one order
    model = XGBoostModel(seed=0)
    model.fit(rows(est), y, groups=np.repeat([0, 1], 8))
    assert model.ready and not model.predicts_ms and model.prior_slope > 0.5
    new = np.array([11.0, 15.0, 13.0])
    assert np.argsort(model.predict(rows(new, seed=9))).tolist() == [0, 2, 1]
    path = save_model(model, tmp_path / "m.json", {})
    _, meta = load_model(path)
    assert meta["settings"]["objective"] == "reg:squarederror" and meta["prior_slope"] == model.prior_slope
    loaded = XGBoostModel(seed=0, pretrained=path)
    assert loaded.prior_slope == model.prior_slope
    assert np.allclose(loaded.predict(rows(new, seed=9)), model.predict(rows(new, seed=9)))


def test_the_pairwise_ranking_model_is_still_there() -> None:
    est = np.linspace(8.0, 20.0, 40)
    y = np.exp(est)
    model = XGBoostModel(seed=0, settings=Settings(objective="rank:pairwise", max_depth=4, prior=None))
    model.fit(rows(est), y)
    assert model.predicts_ms and spearman(model.predict(rows(est + 0.5, seed=11)), est) > 0.9


def test_the_trees_count_more_as_the_trials_add_up() -> None:
    rng = np.random.default_rng(12)
    est = rng.uniform(10, 16, 20)
    X = rows(est, seed=13)
    y = np.exp(est * math.log(2.0) - 2.0 * X[:, 0])
    Xt = rows(rng.uniform(10, 16, 5), seed=14)
    fitted = {}
    for name, settings in {
        "line": Settings(rounds=0),
        "full": Settings(tree_trials=0.0),
        "blend": Settings(tree_trials=30.0),
    }.items():
        model = XGBoostModel(seed=0, settings=settings)
        model.fit(X, y)
        fitted[name] = np.log(model.predict(Xt))
    # 20 trials against 30: the trees' correction counts 20 / 50 of itself
    share = 20 / (20 + 30)
    expected = fitted["line"] + share * (fitted["full"] - fitted["line"])
    assert fitted["blend"] == pytest.approx(expected, rel=1e-5)


def test_a_trial_timed_far_off_barely_moves_the_line() -> None:
    est = np.linspace(10.0, 14.0, 9)
    y = np.exp(est * math.log(2.0)) * 1e-6
    y[4] *= 100.0  # timed on a busy machine
    model = XGBoostModel(seed=0, settings=Settings(rounds=0, prior_weight=1e9))  # the slope stays 1
    model.fit(rows(est), y)
    a, b = model._line  # type: ignore[misc]
    assert b == pytest.approx(1.0) and a == pytest.approx(math.log(1e-6), abs=1e-9)  # the median ignores it
    mean = XGBoostModel(seed=0, settings=Settings(rounds=0, prior_weight=1e9, huber=0.0))
    mean.fit(rows(est), y)
    assert mean._line[0] == pytest.approx(math.log(1e-6) + math.log(100.0) / 9)  # type: ignore[index]


def test_rank_labels_keep_the_order_and_pull_a_far_off_trial_in() -> None:
    from autotune.search.cost_model import _labels

    z = np.log(np.array([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1000.0]))  # the last: a descheduled slice
    masks = [np.ones(len(z), dtype=bool)]
    assert np.array_equal(_labels(z, masks, "log"), z)
    ranked = _labels(z, masks, "rank")
    assert np.all(np.diff(ranked) > 0)  # the same order
    assert ranked[-1] < math.log(3.0)  # the slowest, but not a thousand times slower
    assert np.median(ranked) == pytest.approx(np.median(z))
    with pytest.raises(ValueError, match="unknown labels"):
        _labels(z, masks, "zscore")


def test_a_model_fitted_on_rank_labels_predicts_milliseconds_in_the_estimates_order() -> None:
    est = np.linspace(10.0, 14.0, 12)
    y = np.exp(est * math.log(2.0)) * 1e-6
    y[-1] *= 1000.0  # timed far off
    model = XGBoostModel(settings=Settings(labels="rank", rounds=0))
    model.fit(rows(est), y)
    assert model.predicts_ms
    assert spearman(model.predict(rows(est, seed=1)), est) == pytest.approx(1.0)
    # the trials say slope 1 but for the far-off one, which pulls log labels' slope up to 1.45
    on_logs = XGBoostModel(settings=Settings(labels="log", rounds=0))
    on_logs.fit(rows(est), y)
    assert abs(model.prior_slope - 1.0) < 0.1 < on_logs.prior_slope - 1.0
