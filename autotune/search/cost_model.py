"""Cost models: predict a candidate's latency from its features, to choose what to measure.

A :class:`CostModel` is fitted on the features (:mod:`autotune.search.features`)
of the measured ``ok`` trials and their median latencies, and predicts the
latency in milliseconds of unmeasured candidates. Until it has seen
``min_samples`` trials (or when it does not rank at all, ``"none"``) it
predicts NaN: the tuner then picks candidates at random (seeded).

Models are registered by name, so the YAML says ``cost_model: xgboost``::

    model = make_cost_model("xgboost", seed=0)
    model.fit(X, latency_ms)
    model.predict(X_new)          # ms; NaN everywhere until fitted on enough samples

- ``"xgboost"`` (:class:`XGBoostModel`): gradient-boosted trees on ``log(ms)``,
  100 trees of depth 4 on 32 histogram bins, one thread (about 0.1 s to fit
  a few hundred trials); needs at least 4 trials.
- ``"none"`` (:class:`NoModel`): no ranking; every sampled candidate is measured.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError

__all__ = ["COST_MODELS", "CostModel", "NoModel", "XGBoostModel", "make_cost_model", "register_cost_model"]


class CostModel(ABC):
    """Predicts latency (ms) from feature rows. ``ranks`` False: the tuner measures everything."""

    name: ClassVar[str]
    ranks: ClassVar[bool] = True
    min_samples: ClassVar[int] = 0

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    @abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        """Fit on rows ``X`` (``n x features``) and latencies ``y`` (ms, > 0); replaces any earlier fit."""

    @abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted latency (ms) per row of ``X``; NaN for every row while the model is not ready."""

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


def make_cost_model(name: str, seed: int = 0) -> CostModel:
    """The cost model registered as ``name``, seeded."""
    cls = COST_MODELS.get(name)
    if cls is None:
        raise ConfigError(f"unknown cost model {name!r}; known cost models: {', '.join(sorted(COST_MODELS))}")
    return cls(seed=seed)


def _check_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(f"cost model: expected X of n rows and y of n values, got {X.shape} and {y.shape}")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("cost model: latencies must be finite and > 0")
    return X, y


@register_cost_model
class NoModel(CostModel):
    """No model: predicts NaN, so every sampled candidate is measured."""

    name = "none"
    ranks = False

    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        _check_xy(X, y)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), np.nan)

    @property
    def ready(self) -> bool:
        return False


@register_cost_model
class XGBoostModel(CostModel):
    """Boosted trees on ``log(latency)``: 100 trees, depth 4, 32 bins, one thread, seeded.

    It uses xgboost's native ``train``/``Booster`` API (what ``XGBRegressor``
    wraps), which does not need scikit-learn.
    """

    name = "xgboost"
    min_samples = 4
    ROUNDS = 100
    PARAMS: ClassVar[dict[str, Any]] = {
        "objective": "reg:squarederror",
        "max_depth": 4,
        "max_bin": 32,
        "eta": 0.1,
        "tree_method": "hist",
        "nthread": 1,
        "verbosity": 0,
    }

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self._model: Any = None

    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        X, y = _check_xy(X, y)
        self._model = None
        if len(y) < self.min_samples:
            return
        import xgboost

        data = xgboost.DMatrix(X, label=np.log(y), nthread=1)
        self._model = xgboost.train({**self.PARAMS, "seed": self.seed}, data, num_boost_round=self.ROUNDS)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if self._model is None:
            return np.full(len(X), np.nan)
        if len(X) == 0:
            return np.zeros(0)
        import xgboost

        return np.exp(self._model.predict(xgboost.DMatrix(X, nthread=1)).astype(np.float64))

    @property
    def ready(self) -> bool:
        return self._model is not None
