"""The ranking cost model: metrics on known cases, ranking across workloads of other scales,
the pretrained-model file round trip, and the config form that names one."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from autotune.config import load_config
from autotune.errors import ConfigError
from autotune.search.cost_model import XGBoostModel, make_cost_model
from autotune.search.cost_model_file import load_model, save_model
from autotune.search.features import FEATURE_NAMES
from autotune.search.rank_scores import spearman, top_k, top_k_recall

N = len(FEATURE_NAMES)
ESTIMATE = FEATURE_NAMES.index("log2_estimate_ns")


def data(n: int, scale: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose latency grows with the first two features, times ``scale`` (another workload);
    the estimate's column follows the first (its log2, as the roofline's would)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, N))
    X[:, ESTIMATE] = 20.0 + 2.0 * X[:, 0] / math.log(2.0)
    return X, scale * np.exp(2.0 * X[:, 0] + X[:, 1] + 0.05 * rng.standard_normal(n))


# ---------------------------------------------------------------- metrics


def test_spearman_on_known_cases() -> None:
    assert spearman([1, 2, 3, 4, 5], [10, 20, 30, 40, 50]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4, 5], [9, 7, 5, 3, 1]) == pytest.approx(-1.0)
    # ties take their mean rank: measured ranks 1, 2, 3.5, 5, 3.5 -> 8 / sqrt(10 * 9.5)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95))
    assert spearman([0.1, 0.5, 0.2], [3.0, 1.0, 2.0]) == pytest.approx(-1.0)  # ranks (1, 3, 2) vs (3, 1, 2)
    assert math.isnan(spearman([1, 2], [1, 2])) and math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="3 predictions for 2"):
        spearman([1, 2, 3], [1, 2])


def test_top_k_recall_on_known_cases() -> None:
    assert top_k_recall([1, 2, 3, 4], [1, 3, 2, 4], 2) == 0.5  # {0, 1} predicted, {0, 2} measured
    assert top_k_recall([4, 3, 2, 1], [4, 3, 2, 1], 1) == 1.0
    assert top_k_recall([1, 2, 3, 4], [4, 3, 2, 1], 2) == 0.0
    assert math.isnan(top_k_recall([], [], 3))
    assert [top_k(n) for n in (1, 9, 10, 11, 64)] == [1, 1, 1, 2, 7]


# ---------------------------------------------------------------- the ranking model


def test_it_ranks_within_workloads_of_any_scale() -> None:
    fast, slow = data(60, 1.0, seed=1), data(60, 1000.0, seed=2)
    model = XGBoostModel(seed=0)
    X = np.concatenate([fast[0], slow[0]])
    y = np.concatenate([fast[1], slow[1]])
    model.fit(X, y, groups=np.repeat([0, 1], 60))
    assert model.ready and not model.predicts_ms  # several workloads: an order, not milliseconds
    X_new, y_new = data(40, 50.0, seed=3)  # a third workload, never seen
    assert spearman(model.predict(X_new), y_new) > 0.85


def test_one_workload_predicts_milliseconds() -> None:
    X, y = data(80)
    model = make_cost_model("xgboost", seed=0)
    model.fit(X, y)
    assert model.predicts_ms
    predicted = model.predict(X)
    assert spearman(predicted, y) > 0.85
    assert np.median(np.abs(np.log(predicted / y))) < 0.5  # of the order of the latencies


def test_a_pretrained_model_file_round_trips(tmp_path: Path) -> None:
    X, y = data(80)
    model = XGBoostModel(seed=0)
    model.fit(X, y)
    path = save_model(model, tmp_path / "model.json", {"trained_on": [{"run": "a", "ok_trials": 80}]})
    booster, meta = load_model(path)
    assert meta["features"] == list(FEATURE_NAMES) and meta["trained_on"][0]["ok_trials"] == 80
    X_new, _ = data(30, seed=4)
    import xgboost

    assert np.allclose(booster.predict(xgboost.DMatrix(X_new)), model.booster.predict(xgboost.DMatrix(X_new)))
    loaded = make_cost_model("xgboost", seed=0, pretrained=path)
    assert loaded.ready and not loaded.predicts_ms  # it ranks before any trial of the run
    # by the estimate's line with the file's slope: the file's trees wait for the run's own trials
    line = np.exp(loaded.prior_slope * X_new[:, ESTIMATE] * math.log(2.0))  # type: ignore[attr-defined]
    assert loaded.predict(X_new) == pytest.approx(line)
    loaded.fit(X[:2], y[:2])  # too few of the run's own: still the pretrained order
    assert loaded.predict(X_new) == pytest.approx(line)
    loaded.fit(X, y)  # the run's trials add trees; the file's model is not changed
    assert loaded.predicts_ms
    again = make_cost_model("xgboost", seed=0, pretrained=path)
    assert np.array_equal(again.predict(X_new), make_cost_model("xgboost", pretrained=path).predict(X_new))


def test_a_bad_model_file_names_the_file(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(
        ConfigError, match=re.escape(f"{other}: search.cost_model.pretrained: expected a model")
    ):
        make_cost_model("xgboost", pretrained=other)
    X, y = data(20)
    model = XGBoostModel(seed=0)
    model.fit(X, y)
    path = save_model(model, tmp_path / "m.json", {})
    doc = json.loads(path.read_text())
    doc["features"] = doc["features"][:-1]
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="trained on other features"):
        make_cost_model("xgboost", pretrained=path)
    with pytest.raises(ConfigError, match="cannot start from a pretrained file"):
        make_cost_model("none", pretrained=path)


# ---------------------------------------------------------------- the config


def write(tmp_path: Path, cost_model: object) -> Path:
    cfg = {
        "workload": {"name": "pool_chain", "args": {"height": 20, "width": 20, "channels": 8}},
        "memory": {"pools": [{"name": "sram", "size": "2MiB"}]},
        "search": {"space": "cascade", "trials": 4, "cost_model": cost_model},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_config_names_a_pretrained_model(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text("{}")
    cfg = load_config(write(tmp_path, {"kind": "xgboost", "pretrained": "m.json"}))
    assert cfg.search.cost_model == "xgboost" and cfg.search.pretrained == tmp_path / "m.json"
    assert cfg.to_dict()["search"]["cost_model"] == {
        "kind": "xgboost",
        "pretrained": str(tmp_path / "m.json"),
    }
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(cfg.to_dict()))
    assert load_config(copy).search == cfg.search
    plain = load_config(write(tmp_path, "none"))
    assert plain.search.pretrained is None and "pretrained" not in plain.to_dict()["search"]
    assert load_config(write(tmp_path, {"kind": "none"})).search.cost_model == "none"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "xgboost", "pretrained": "missing.json"},
         "search.cost_model.pretrained: expected a model file that `autotune train-cost-model` wrote"),
        ({"kind": "none", "pretrained": "m.json"}, "search.cost_model.kind: a pretrained model file needs kind"),
        ({"kind": "forest"}, "search.cost_model.kind: expected one of 'xgboost', 'none'"),
        ({"pretrained": "m.json"}, "search.cost_model"),
    ],
)  # fmt: skip
def test_a_bad_cost_model_names_the_file_and_field(tmp_path: Path, spec: object, message: str) -> None:
    (tmp_path / "m.json").write_text("{}")
    path = write(tmp_path, spec)
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:")
