"""Calibration: the shipped factors reproduce published figures (tuned) and predict others (checked).

Run with ``-s`` to see the table; ``python -m planner.physics.calibration.serving`` prints the same.
"""

from __future__ import annotations

import pytest

from planner.base.errors import InputError
from planner.physics.calibration.serving import (
    calibration_checks,
    calibration_table,
    format_table,
    median_abs_error,
)
from planner.physics.calibration.values import (
    CALIBRATION_PATH,
    default_calibration,
    gpu_family,
    load_calibration,
)
from planner.physics.train import make_gpu


@pytest.fixture(scope="module")
def rows():
    table = calibration_table()
    print("\n" + format_table(table))
    return table


def test_every_figure_within_its_bound(rows):
    bad = [
        f"{r.check.id}: {r.error:+.1%} (bound {r.check.bound:.0%})"
        for r in rows
        if abs(r.error) > r.check.bound
    ]
    assert not bad, bad


def test_tuned_figures_are_reproduced(rows):
    for r in rows:
        if r.check.tuned:
            assert abs(r.error) <= 0.05, r.check.id


def test_median_errors(rows):
    assert median_abs_error(rows, "train") <= 0.15
    assert median_abs_error(rows, "serve") <= 0.25
    # the figures no factor was fitted to, on their own
    assert median_abs_error(rows, "train", tuned=False) <= 0.20
    assert median_abs_error(rows, "serve", tuned=False) <= 0.25


def test_checked_figures_outnumber_tuned_ones():
    checks = calibration_checks()
    tuned = sum(c.tuned for c in checks)
    assert tuned < len(checks) - tuned
    assert {c.kind for c in checks} == {"train", "serve"}


def test_ids_exist_in_published_reference():
    """Every check names an entry of the published measurements (catalogs/sources/published.yaml,
    a verbatim copy of the project's shared reference file)."""
    from pathlib import Path

    ref = Path(CALIBRATION_PATH).resolve().parent / "sources/published.yaml"
    text = ref.read_text()
    for c in calibration_checks():
        assert f"id: {c.id.split('#')[0]}" in text, c.id


def test_every_factor_is_sourced():
    cal = default_calibration()
    for section in (cal.train, cal.serve, cal.links):
        for name in type(section).model_fields:
            value = getattr(section, name)
            for v in value if isinstance(value, tuple) else (value,):
                v = v[1] if isinstance(v, tuple) else v  # (gpu id, figure) pairs
                assert v.source and v.as_of and v.note, f"{name} lacks source/as_of/note"


def test_unknown_key_is_an_input_error(tmp_path):
    text = CALIBRATION_PATH.read_text().replace("  dp_overlap:", "  goodputt:", 1)
    bad = tmp_path / "calibration.yaml"
    bad.write_text(text)
    with pytest.raises(InputError, match="goodputt"):
        load_calibration(bad)
    with pytest.raises(InputError, match="not found"):
        load_calibration(tmp_path / "missing.yaml")


def test_family_matching():
    cal = default_calibration()
    g = make_gpu("rtx-4090", "NVIDIA GeForce RTX 4090", 24, 1008, 165.2, None, 0, 4, False, "pcie")
    assert gpu_family(g, cal).family == "ada"
    g = make_gpu("mystery", "Mystery accelerator", 24, 1008, 165.2, None, 0, 4, False, "pcie")
    assert gpu_family(g, cal) is None
