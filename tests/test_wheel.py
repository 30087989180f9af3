"""The wheel works: built from a copy of the source, installed into a fresh virtual
environment, it runs ``planner catalog`` and ``planner solve`` from another folder on an
absolute problem path, reading the catalogs it carries (not the checkout's).

Nothing is downloaded: the wheel is built without build isolation (the test extra installs a
setuptools that builds wheels by itself) and installed with ``--no-deps`` into an environment
that sees this one's packages (the dependencies)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.factories import assistant_yaml

ROOT = Path(__file__).resolve().parent.parent
# A small problem that still reads the offers catalog by name (no file beside it: the wheel's).
# problems/inference_startup.yaml took ~3 s more to solve in the fresh interpreter and checks
# nothing more about the install.
PROBLEM = assistant_yaml(gpus=("l4", "a100-pcie-80gb"), top="offers: {files: [offers.yaml]}\n")


BUILD_WHEEL = """\
import sys
from setuptools import build_meta
print(build_meta.build_wheel(sys.argv[1]))
"""


def _run(args: list[str | Path], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a command with an environment that names neither the checkout nor its settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLANNER_DEBUG")}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _source_copy(dest: Path) -> Path:
    """The files a wheel is built from, copied (links kept) so no build output lands in the
    shared checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("planner", "catalogs"):
        shutil.copytree(ROOT / name, dest / name, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


def _see_test_environment(venv: Path) -> None:
    """Let the new venv import the libraries of the environment running the tests.

    ``--system-site-packages`` would show the *base* interpreter's packages, which are not the
    test environment's when the tests run inside a venv (pulp missing, issue 43). A ``.pth``
    line appends the test environment's own site-packages after the new venv's, so the wheel's
    ``planner`` is still the one imported (``.pth`` files inside an appended folder are not
    run, so an editable install of the checkout there stays inactive).
    """
    (site,) = (venv / "lib").glob("python3*/site-packages")
    ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (site / "test-environment.pth").write_text("\n".join(sorted(ours)) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin`` folder of a fresh virtual environment with the wheel installed."""
    base = tmp_path_factory.mktemp("wheel")
    src = _source_copy(base / "src")
    # the PEP 517 hook `pip wheel --no-deps --no-build-isolation` calls, called directly (the
    # same wheel: pip's start-up and its hook runner took ~1.4 s of the ~2.3 s)
    built = _run([sys.executable, "-c", BUILD_WHEEL, base / "dist"], cwd=src)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (base / "dist").glob("gpu_planner-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        f"planner/_catalogs/{p.relative_to(ROOT / 'catalogs').as_posix()}"
        for p in (ROOT / "catalogs").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert "planner/_catalogs/gpus.yaml" in shipped and shipped <= names, shipped - names
    venv = base / "venv"
    # no pip inside it (ensurepip took ~5 s): this environment's pip installs into it
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base)
    assert made.returncode == 0, made.stderr[-3000:]
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q"]
    # --no-compile (~0.6 s): the venv's interpreter compiles what it imports either way, and
    # under PYTHONPYCACHEPREFIX (conftest.py, where set) it would not read pip's bytecode
    pip += ["--no-deps", "--no-index", "--no-compile"]
    done = _run([*pip, "--force-reinstall", wheel], cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    _see_test_environment(venv)  # after the install: pip must not see the checkout's install
    return venv / "bin"


def test_the_installed_package_reads_its_own_catalogs(installed, tmp_path):
    where = _run(
        [
            installed / "python",
            "-c",
            "import planner; from planner.inputs.catalog_dir import CATALOG_DIR;"
            "print(planner.__file__); print(CATALOG_DIR)",
        ],
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    module, catalogs = where.stdout.split()
    venv = installed.parent
    assert Path(module).is_relative_to(venv), module
    assert Path(catalogs).is_relative_to(venv) and (Path(catalogs) / "gpus.yaml").is_file()


def test_catalog_and_solve_run_from_another_folder(installed, tmp_path):
    listing = _run([installed / "planner", "catalog", "--wide"], cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "h100" in listing.stdout.lower()
    problem = tmp_path / "elsewhere" / "problem.yaml"  # no catalog beside it: the wheel's
    problem.parent.mkdir()
    problem.write_text(PROBLEM, encoding="utf-8")
    solved = _run(
        [installed / "planner", "solve", problem.resolve(), "--time-limit", "30", "--json", "-"],
        cwd=tmp_path,
    )
    assert solved.returncode == 0, solved.stderr[-3000:]
    assert '"total_usd"' in solved.stdout
    assert str(ROOT) not in solved.stdout + solved.stderr
    assert (tmp_path / "outputs" / "problem.xlsx").is_file()
