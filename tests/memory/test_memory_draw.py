"""The picture of a plan: a PNG of a fixed size that is not blank."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.memory import Allocation, MemoryPlan, draw, parse_pools, plan_memory
from autotune.memory.draw import DPI, PANEL_HEIGHT, WIDTH


@pytest.mark.parametrize("spec", ["dtcm=4KiB", "dtcm=4KiB,sram=2MiB"])
def test_draw_writes_a_png_of_the_expected_size(tmp_path: Path, spec: str) -> None:
    from matplotlib.image import imread

    pools = parse_pools(spec)
    allocations = [
        Allocation("A", 1000, 0, 3),
        Allocation("B", 600, 1, 2),
        Allocation("C", 2000, 3, 5, ("sram",) if len(pools) > 1 else ()),
    ]
    plan = plan_memory(allocations, pools, "hill_climb")
    out = draw(plan, tmp_path / "sub" / "plan.png")
    assert out == tmp_path / "sub" / "plan.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(out)
    assert image.shape[:2] == (round(PANEL_HEIGHT * len(pools) * DPI), round(WIDTH * DPI))
    colours = np.unique(image.reshape(-1, image.shape[-1]), axis=0)
    assert len(colours) > 1


def test_draw_empty_plan(tmp_path: Path) -> None:
    out = draw(MemoryPlan((), parse_pools("dtcm=1KiB"), "greedy_by_size"), str(tmp_path / "e.png"))
    assert out.stat().st_size > 0
