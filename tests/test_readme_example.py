"""The README's Python example runs as written: its first ```python block is run by a fresh
interpreter in a scratch folder holding a copy of ``problems/`` (so the files it writes land
there), with nothing installed beyond the package's own dependencies (no matplotlib)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def first_python_block(markdown: str) -> str:
    """The code of the first fenced ```python block of a Markdown text ('' when there is none)."""
    m = BLOCK.search(markdown)
    return m.group(1) if m else ""


def run_example(code: str, folder: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with ``folder`` (a copy of problems/ inside) as the
    working directory; matplotlib is made unimportable, as on an install without it."""
    shutil.copytree(ROOT / "problems", folder / "problems")
    (folder / "matplotlib").mkdir()  # a package that fails on import: no plotting allowed
    (folder / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(folder)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_block_finder_takes_the_first_python_block():
    text = "x\n```bash\nls\n```\n```python\na = 1\n```\n```python\nb = 2\n```\n"
    assert first_python_block(text) == "a = 1\n"
    assert first_python_block("```bash\nls\n```\n") == ""


def test_the_readme_python_example_runs(tmp_path):
    code = first_python_block((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "import planner" in code, "README.md has no ```python block using planner"
    done = run_example(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
