"""How the console script ends: at once after its exit handlers, skipping the interpreter's
teardown (issue 51: 0.19-0.28 s of the reference's command), with the code it meant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ENTRY = "import sys; from planner.__main__ import main; sys.argv[0] = 'planner'; "


def _run(tmp_path: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ENTRY + code, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )


def test_exit_handlers_run_and_the_code_and_output_are_kept(tmp_path):
    code = "import atexit; atexit.register(lambda: open('ran', 'w').write('yes')); main()"
    ok = _run(tmp_path, code, "--version")
    assert ok.returncode == 0 and "planner, version" in ok.stdout
    assert (tmp_path / "ran").read_text() == "yes"
    bad = _run(tmp_path, code, "solve", "missing.yaml")
    assert bad.returncode == 2 and "file not found" in bad.stderr


def test_a_live_thread_is_waited_for_as_at_a_normal_exit(tmp_path):
    """A non-daemon thread still running (none of the planner's: a caller's) is joined."""
    code = (
        "import threading, time\n"
        "def late():\n    time.sleep(0.5); open('late', 'w').write('done')\n"
        "threading.Thread(target=late).start(); main()"
    )
    r = _run(tmp_path, code, "--version")
    assert r.returncode == 0
    assert (tmp_path / "late").read_text() == "done"
