"""experiments/cost_model_heldout.py's evaluation on tiny synthetic logs: which trials each model
is fitted on, which it predicts, and the figures report.md's function makes of them."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest
from experiment_scripts import load_experiment

from autotune.search.cost_model import CostModel
from autotune.search.rank_scores import spearman


@pytest.fixture(scope="module")
def heldout() -> Any:
    return load_experiment("cost_model_heldout")


class Echo(CostModel):
    """Predicts a row's first column once fitted on a row or more; remembers each fit's row count."""

    name = "echo"
    min_samples = 1
    fits: ClassVar[list[int]] = []

    labels: ClassVar[list[list[float]]] = []
    weights: ClassVar[list[list[float] | None]] = []

    def fit(
        self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None, weights: np.ndarray | None = None
    ) -> None:
        self.n = len(y)
        Echo.fits.append(len(y))
        Echo.labels.append(list(y))
        Echo.weights.append(None if weights is None else list(weights))

    def predict(self, X: np.ndarray) -> np.ndarray:
        return X[:, 0].astype(float) if self.ready else np.full(len(X), np.nan)

    @property
    def ready(self) -> bool:
        return getattr(self, "n", 0) >= 1

    @property
    def predicts_ms(self) -> bool:
        return True


def log(heldout: Any, key: str, rounds: list[list[tuple[str, float, float]]], noise: float = 0.0) -> Any:
    """A log of ``(status, feature x, median ms)`` trials per round (each timed with ``noise``, its
    fastest run at half its median)."""
    trials, n = [], 0
    for r, trials_of_round in enumerate(rounds):
        for status, x, ms in trials_of_round:
            trials.append(heldout.Trial(n, r, status, ms, None, {"x": x}, noise, ms / 2))
            n += 1
    return heldout.Log(key, key, tuple(trials), 0)


def test_prequential_fits_on_earlier_rounds_and_scores_like_the_report(heldout: Any) -> None:
    rounds = [
        [("ok", 9.0, 5.0), ("ok", 1.0, 1.0)],  # nothing fitted yet: not predicted
        [("ok", 1.0, 1.0), ("ok", 2.0, 3.0), ("cutoff", 9.0, 50.0)],
        [("ok", 3.0, 2.0), ("ok", 4.0, 4.0)],
    ]
    variant = heldout.Variant(lambda seed: Echo(seed), ("x",), "echo")
    Echo.fits = []
    quality = heldout.prequential(log(heldout, "a", rounds), variant)
    assert Echo.fits == [0, 2, 5]  # before each round, every timed trial of the rounds before it
    assert quality["trials"] == 4.0  # the ok trials of rounds 1 and 2
    assert quality["spearman"] == pytest.approx(spearman([1, 2, 3, 4], [1, 3, 2, 4]))  # 0.8
    assert quality["recall"] == 1.0 and quality["k"] == 1.0


def test_leave_one_workload_out_fits_on_the_other_workloads_only(heldout: Any) -> None:
    a1 = log(heldout, "a", [[("ok", 1.0, 1.0), ("ok", 2.0, 2.0), ("ok", 3.0, 4.0)]])
    a2 = log(heldout, "a", [[("ok", 1.0, 1.0)]])
    b = log(heldout, "b", [[("ok", 1.0, 1.0), ("cutoff", 2.0, 9.0)]])
    variant = heldout.Variant(lambda seed: Echo(seed), ("x",), "echo")
    Echo.fits = []
    assert heldout.leave_one_out([a1, a2, b], 0, variant) == pytest.approx(1.0)
    assert Echo.fits == [2]  # b's timed trials, not a2's (the same workload)
    assert math.isnan(heldout.leave_one_out([a1, a2, b], 2, variant))  # b has 1 ok trial: no figure


def test_the_table_counts_the_logs_at_or_above_the_goal(heldout: Any) -> None:
    row = {
        "log": "x/y", "workload": "y", "ok": 10, "skipped": 0, "noisy": 3, "logged": None, "estimate": 0.5,
        "estimate_steady": 0.75,
        "after": {
            "prequential": {"spearman": 0.7, "recall": 0.5, "trials": 8.0}, "leave_one_out": 0.2,
            "out_of_fold": {"spearman": 0.9},
        },
    }  # fmt: skip
    lines = heldout.table([row], ["after"])
    assert lines[2] == "| x/y | y | 10 | 0 | 3 | - | 0.50 | 0.75 | 0.70 (8) | 0.50 | 0.20 | 0.90 |"
    assert "(1 of 1 >= 0.6)" in lines[3]


def test_before_and_after_side_by_side(heldout: Any) -> None:
    def variant(spearman: float | None, loo: float) -> dict[str, Any]:
        return {"prequential": None if spearman is None else {"spearman": spearman}, "leave_one_out": loo}

    rows = [
        {"log": "a", "before": variant(0.5, 0.1), "after": variant(0.65, 0.3)},
        {"log": "b", "before": variant(None, math.nan), "after": variant(0.6, 0.2)},
    ]
    lines = heldout.before_after(rows)
    assert lines[2:] == [
        "| a | 0.50 | 0.65 | 0.10 | 0.30 |",
        "| b | - | 0.60 | - | 0.20 |",
        "| **median** | 0.50 | 0.62 | 0.10 | 0.25 |",
        "| **at or above 0.6** | 0 of 2 | 2 of 2 | 0 of 2 | 0 of 2 |",
    ]


def test_before_is_the_model_and_features_of_its_commit(heldout: Any) -> None:
    before = heldout.VARIANTS["before"]
    assert before.names == tuple(heldout.BEFORE + n for n in heldout.BEFORE_NAMES)
    model = before.make(0)
    assert model.settings.prior == heldout.BEFORE + "log2_estimate_ns"
    features_then = heldout._features_at(heldout.BEFORE_REVISION)
    from autotune import ir
    from autotune.memory import Pool
    from autotune.memory.lowering import empty_plan

    a, o, i = ir.decl_buffer("A", (64,)), ir.decl_buffer("O", (64,)), ir.Var("i")
    body = ir.For(i, ir.const(0), ir.const(64), "serial", ir.BufferStore(o, a[i] * 2.0, (i,)))
    values = features_then(ir.Func("f", (a, o), body), empty_plan((Pool("sram", 1 << 20),)))
    assert tuple(values) == heldout.BEFORE_NAMES


def test_what_a_variant_fits_on_and_what_is_scored(heldout: Any) -> None:
    rounds = [
        [("ok", 1.0, 2.0), ("cutoff", 9.0, 3.0), ("ok", 2.0, 4.0)],
        [("ok", 1.0, 1.0), ("ok", 3.0, 5.0), ("ok", 2.0, 3.0)],
    ]
    a = log(heldout, "a", rounds, noise=0.6)
    assert heldout.cutoff_censored(a.trials)[0].tolist() == [2.0, 5.0, 4.0, 1.0, 5.0, 3.0]  # 3 -> the slowest ok
    assert heldout.min_labels(a.trials)[0].tolist() == [1.0, 1.5, 2.0, 0.5, 2.5, 1.5]
    y, w = heldout.noise_weighted(a.trials)
    assert y.tolist() == [2.0, 3.0, 4.0, 1.0, 5.0, 3.0] and w.tolist() == [0.5] * 6  # NOISY 0.3 / 0.6
    variant = heldout.Variant(lambda seed: Echo(seed), ("x",), "echo", heldout.min_noise_weighted)
    Echo.fits, Echo.labels, Echo.weights = [], [], []
    quality = heldout.prequential(a, variant)
    assert Echo.labels[1] == [1.0, 1.5, 2.0] and Echo.weights[1] == [0.5] * 3
    assert quality["trials"] == 3.0 and quality["spearman"] == pytest.approx(1.0)  # scored on the medians
    b = log(heldout, "b", [[("ok", 1.0, 1.0), ("ok", 2.0, 2.0), ("ok", 3.0, 8.0)]])
    Echo.fits, Echo.labels, Echo.weights = [], [], []
    heldout.leave_one_out([b, a], 0, variant)
    assert Echo.labels == [[1.0, 1.5, 2.0, 0.5, 2.5, 1.5]] and Echo.weights == [[0.5] * 6]


def test_the_summary_counts_the_logs_each_variant_moves(heldout: Any) -> None:
    def variant(spearman: float | None, loo: float, oof: float | None = None) -> dict[str, Any]:
        return {
            "prequential": None if spearman is None else {"spearman": spearman}, "leave_one_out": loo,
            "out_of_fold": None if oof is None else {"spearman": oof},
        }  # fmt: skip

    rows = [
        {"log": "a", "x": variant(0.7, 0.1), "after": variant(0.5, 0.3, 0.7)},
        {"log": "b", "x": variant(0.2, 0.8), "after": variant(0.6, 0.6, 0.5)},
        {"log": "c", "x": variant(None, math.nan), "after": variant(0.4, 0.2, 0.8)},
    ]
    lines = heldout.summary(rows, ["x", "after"])
    assert lines[2:] == [
        "| `x` | 0.45 | 0.45 | 1 of 3 | 1 / 1 | 0.45 | 0.45 | 1 of 3 | - | 0 of 3 |",
        "| `after` | 0.50 | 0.50 | 1 of 3 | 0 / 0 | 0.30 | 0.37 | 1 of 3 | 0.70 | 2 of 3 |",
    ]


def test_out_of_fold_scores_each_ok_trial_by_a_model_fitted_on_the_rest(heldout: Any) -> None:
    """Eight ok trials and a cutoff one in four folds: each model is fitted on the other six ok
    trials and the cutoff one; a variant fitted on other labels than the medians gets no figure."""
    trials = [("ok", x, ms) for x, ms in [(1, 1), (2, 3), (3, 2), (4, 4), (5, 6), (6, 5), (7, 7), (8, 8)]]
    a = log(heldout, "a", [[*trials, ("cutoff", 9.0, 30.0)]])
    Echo.fits = []
    quality = heldout.out_of_fold(a, heldout.Variant(lambda seed: Echo(seed), ("x",), "echo"))
    assert Echo.fits == [7, 7, 7, 7]
    assert quality["trials"] == 8.0 and quality["spearman"] == pytest.approx(
        spearman(range(1, 9), [1, 3, 2, 4, 6, 5, 7, 8])
    )
    assert heldout.out_of_fold(a, heldout.Variant(lambda seed: Echo(seed), ("x",), "echo", heldout.min_labels)) is None
