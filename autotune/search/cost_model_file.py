"""Cost model files: a fitted XGBoost model and what it was trained on, as one JSON file
(``autotune train-cost-model`` writes one; ``cost_model: {kind: xgboost, pretrained: PATH}`` reads it)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .cost_model import XGBoostModel

__all__ = ["MODEL_FORMAT", "load_model", "save_model"]

MODEL_FORMAT = "autotune-cost-model"



def save_model(model: XGBoostModel, path: str | os.PathLike[str], meta: Mapping[str, Any]) -> Path:
    """Write a fitted model and what it was trained on (``meta``) as one JSON file."""
    from ..files import write_atomic
    from .features import FEATURE_NAMES

    if model.booster is None:
        raise ValueError("save_model: the model is not fitted")
    doc = {
        "format": MODEL_FORMAT,
        "version": 1,
        "kind": model.name,
        "objective": model.settings.objective,
        "settings": asdict(model.settings),
        "prior_slope": model.prior_slope,
        "features": list(FEATURE_NAMES),
        **dict(meta),
        "booster": json.loads(bytes(model.booster.save_raw("json"))),
    }
    return write_atomic(Path(path), json.dumps(doc) + "\n")


def load_model(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """The Booster of a model file and its other fields; ConfigError naming the file and what is wrong."""
    import xgboost

    from .features import FEATURE_NAMES

    where = f"{path}: search.cost_model.pretrained"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read it as a cost model file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT or "booster" not in doc:
        raise ConfigError(f"{where}: expected a model file that `autotune train-cost-model` wrote")
    if doc.get("features") != list(FEATURE_NAMES):
        given = doc.get("features")
        theirs: list[Any] = given if isinstance(given, list) else []
        missing = [n for n in FEATURE_NAMES if n not in theirs]
        raise ConfigError(
            f"{where}: the model was trained on other features (missing {missing or 'none'}, "
            f"{len(theirs)} vs {len(FEATURE_NAMES)}); train it again with `autotune train-cost-model`"
        )
    booster = xgboost.Booster()
    booster.load_model(bytearray(json.dumps(doc["booster"]).encode()))
    return booster, {k: v for k, v in doc.items() if k != "booster"}


