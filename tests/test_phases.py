"""The phase log (planner.base.phases) and the phase benchmark read the same names: a phase
the command records that the benchmark's table does not know would drop out of it unseen."""

from __future__ import annotations

from click.testing import CliRunner

from benchmarks.phases import PHASES, fmt_row, heading
from planner.base.phases import recording
from planner.cli import cli
from tests.factories import assistant_yaml


def test_every_phase_a_solve_records_has_a_column(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(assistant_yaml())
    with recording() as log:
        r = CliRunner().invoke(
            cli,
            [
                "solve",
                str(path),
                "-o",
                str(tmp_path / "p.xlsx"),
                "--json",
                str(tmp_path / "p.json"),
            ],
        )
    assert r.exit_code == 0, r.output
    known = {name for name, _ in PHASES}
    recorded = [name for name, _ in log.entries]
    assert {"load", "candidates", "model build", "verify", "write workbook", "write json"} <= set(
        recorded
    )
    assert set(recorded) <= known, set(recorded) - known
    row = fmt_row(
        {
            "problem": "small",
            "outer_wall": 1.0,
            "phases": log.entries,
            "status": "optimal",
            "gap": 0.0,
            "objective": 1.0,
        }
    )
    assert len(row) == len(heading())
