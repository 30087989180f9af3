"""constraints.txt, the lock of the versions the tests pass with (issue 43): it pins every
library pyproject.toml asks for, in every extra, at a version inside pyproject's range, so the
README's commands install a tested set and the ranges say what was tested."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraints.txt: {line!r} is not an exact pin (name==version)"
        key = canonicalize_name(name)
        assert key not in pins, f"constraints.txt pins {name} twice"
        pins[key] = version
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines += extra
    return [Requirement(r) for r in lines]


def test_every_requirement_is_pinned_inside_its_range():
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}"
        )


def test_the_lock_does_not_pin_the_planner_or_pip():
    pins = _pins()
    assert "gpu-planner" not in pins  # the project itself is installed editable, not pinned
    assert "pip" not in pins  # the installer is the machine's own
