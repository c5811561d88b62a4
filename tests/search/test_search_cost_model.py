"""The cost-model contract, run over every registered model, and what each model adds to it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from autotune.errors import ConfigError
from autotune.search.candidates import choose
from autotune.search.cost_model import COST_MODELS, CostModel, make_cost_model, register_cost_model

N_FEATURES = 12


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose latency grows with the first two features (log-linear, a little noise)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, N_FEATURES))
    y = np.exp(2.0 * X[:, 0] + X[:, 1] + 0.05 * rng.standard_normal(n))
    return X, y


@pytest.fixture(params=sorted(COST_MODELS))
def model(request: pytest.FixtureRequest) -> CostModel:
    return make_cost_model(request.param, seed=0)


# ---------------------------------------------------------------- the contract


def test_registered_under_its_name(model: CostModel) -> None:
    assert COST_MODELS[model.name] is type(model)
    assert model.seed == 0


def test_predicts_nan_before_fitting(model: CostModel) -> None:
    X, _ = data(5)
    assert not model.ready
    out = model.predict(X)
    assert out.shape == (5,) and np.isnan(out).all()


def test_too_few_samples_is_not_an_error(model: CostModel) -> None:
    for n in range(model.min_samples):
        X, y = data(n)
        model.fit(X, y)
        assert not model.ready
        assert np.isnan(model.predict(data(3)[0])).all()
    model.fit(np.zeros((0, N_FEATURES)), np.zeros(0))
    assert not model.ready


def test_prediction_shape_and_values(model: CostModel) -> None:
    X, y = data(60)
    model.fit(X, y)
    out = model.predict(data(7, seed=1)[0])
    assert out.shape == (7,) and out.dtype == np.float64
    assert model.predict(np.zeros((0, N_FEATURES))).shape == (0,)
    if model.ready:
        assert np.all(np.isfinite(out)) and np.all(out > 0)
    else:
        assert not model.ranks and np.isnan(out).all()


def test_a_model_that_ranks_learns_the_order(model: CostModel) -> None:
    X, y = data(200)
    model.fit(X, y)
    if not model.ranks:
        pytest.skip(f"{model.name} does not rank")
    Xt, yt = data(100, seed=2)
    pred = model.predict(Xt)
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    assert np.corrcoef(rank(pred), rank(yt))[0, 1] > 0.8


def test_same_seed_same_predictions(model: CostModel) -> None:
    X, y = data(50)
    other = make_cost_model(model.name, seed=0)
    model.fit(X, y)
    other.fit(X, y)
    np.testing.assert_array_equal(model.predict(X), other.predict(X))


def test_refit_replaces_the_previous_fit(model: CostModel) -> None:
    X, y = data(50)
    model.fit(X, y)
    model.fit(X[:1], y[:1])
    assert model.ready == (model.ranks and model.min_samples <= 1)


@pytest.mark.parametrize(
    "X, y",
    [
        (np.zeros((3, 2)), np.ones(2)),  # lengths differ
        (np.zeros(3), np.ones(3)),  # X not 2-d
        (np.zeros((2, 2)), np.array([1.0, 0.0])),  # a latency of 0
        (np.zeros((2, 2)), np.array([1.0, np.nan])),
    ],
)
def test_bad_training_data_is_rejected(model: CostModel, X: np.ndarray, y: np.ndarray) -> None:
    with pytest.raises(ValueError, match="cost model"):
        model.fit(X, y)


@pytest.mark.parametrize(
    "weights",
    [np.ones(3), np.array([1.0, 0.0, 1.0, 1.0]), np.array([1.0, np.nan, 1.0, 1.0])],  # 3 for 4 rows; 0; NaN
)
def test_bad_weights_are_rejected(model: CostModel, weights: np.ndarray) -> None:
    X, y = data(4)
    with pytest.raises(ValueError, match="cost model: expected 4 finite weights > 0"):
        model.fit(X, y, weights=weights)


# ---------------------------------------------------------------- registry, models


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown cost model 'xgb'; known cost models: none, xgboost"):
        make_cost_model("xgb")


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register_cost_model(type("Again", (COST_MODELS["none"],), {"name": "none"}))


def test_none_never_ranks() -> None:
    m = make_cost_model("none")
    m.fit(*data(100))
    assert not m.ranks and not m.ready


def test_xgboost_needs_four_samples() -> None:
    m = make_cost_model("xgboost")
    m.fit(*data(3))
    assert not m.ready
    m.fit(*data(4))
    assert m.ready and np.isfinite(m.predict(data(2)[0])).all()


# ---------------------------------------------------------------- eps-greedy choice


def indices(*args: Any) -> list[int]:
    """The candidates :func:`choose` picks, without how."""
    return [i for i, _ in choose(*args)]


def test_choose_takes_the_best_then_explores() -> None:
    predicted = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0])
    rng = np.random.default_rng(0)
    picked = indices(predicted, 4, 0.25, rng)
    assert picked[:3] == [1, 3, 4]  # the best three by prediction
    assert picked[3] in {0, 2, 5, 6, 7} and len(set(picked)) == 4
    assert indices(predicted, 4, 0.25, np.random.default_rng(0)) == picked  # seeded


def test_choose_says_how_each_was_picked() -> None:
    predicted = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0])
    picks = choose(predicted, 4, 0.25, np.random.default_rng(0))
    assert [how for _, how in picks] == ["model", "model", "model", "random"]
    assert [i for i, _ in picks][:3] == [1, 3, 4]
    assert {how for _, how in choose(np.full(10, np.nan), 3, 0.25, np.random.default_rng(1))} == {"random"}
    assert choose(np.arange(3.0), 5, 0.25, np.random.default_rng(1)) == [(i, "every") for i in range(3)]


def test_choose_is_random_without_predictions_and_takes_all_when_few() -> None:
    nan = np.full(10, np.nan)
    a = indices(nan, 3, 0.25, np.random.default_rng(1))
    assert len(set(a)) == 3 and a == indices(nan, 3, 0.25, np.random.default_rng(1))
    assert indices(nan, 12, 0.25, np.random.default_rng(1)) == list(range(10))
    assert indices(np.arange(5.0), 0, 0.25, np.random.default_rng(1)) == []


# ---------------------------------------------------------------- xgboost: weights


def test_xgboost_weights_of_one_are_no_weights() -> None:
    X, y = data(40)
    plain, weighted = make_cost_model("xgboost"), make_cost_model("xgboost")
    plain.fit(X, y)
    weighted.fit(X, y, weights=np.ones(len(y)))
    np.testing.assert_allclose(weighted.predict(X), plain.predict(X))


def test_xgboost_a_row_that_weighs_less_pulls_less() -> None:
    from autotune.search.cost_model import Settings, XGBoostModel

    X, y = data(40)
    y = y.copy()
    y[0] *= 50.0  # a trial timed far too slow
    settings = Settings(prior=None, huber=0.0)
    full, light = XGBoostModel(settings=settings), XGBoostModel(settings=settings)
    full.fit(X, y)
    weights = np.ones(len(y))
    weights[0] = 0.01
    light.fit(X, y, weights=weights)
    clean = data(40)[1]
    assert abs(np.log(light.predict(X[:1])[0] / clean[0])) < abs(np.log(full.predict(X[:1])[0] / clean[0]))


def test_xgboost_pairwise_takes_no_weights() -> None:
    from autotune.search.cost_model import Settings, XGBoostModel

    X, y = data(10)
    model = XGBoostModel(settings=Settings(objective="rank:pairwise", prior=None))
    with pytest.raises(ValueError, match="cost model: rank:pairwise is fitted without weights"):
        model.fit(X, y, weights=np.ones(10))
