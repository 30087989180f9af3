"""The documentation: `mkdocs build --strict` passes (a broken link or anchor, a page left out
of the navigation or a generator error fails it), the generated reference lists every field of
the problem file's schema, every command and option and every exit code, and the README stays
a page a newcomer reads in five minutes, its two commands first (the second is what CI runs)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from planner.base.errors import ExitCode
from planner.cli import cli
from planner.cli.schema import problem_schema

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    # the docs extra is part of the test command (pip install -e ".[test,cluster,docs,ui]"):
    # a missing mkdocs fails here rather than skipping the strict build
    import mkdocs  # noqa: F401
    import mkdocs_click  # noqa: F401

    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.perf_counter() - start
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert seconds < 60, f"mkdocs build took {seconds:.1f} s"
    return out


def test_the_site_builds_strict_with_the_generated_pages(site):
    for page in ("index", "reference/problem-file/index", "reference/commands/index",
                 "reference/exit-codes/index", "reference/limits/index", "benchmarks/index"):  # fmt: skip
        assert (site / f"{page}.html").is_file(), page
    assert (site / "problem.schema.json").is_file()  # the schema editors point to is published


def _commands(group: click.Command, prefix: str = "planner") -> list[tuple[str, click.Command]]:
    out = [(prefix, group)]
    if isinstance(group, click.Group):
        for name, sub in sorted(group.commands.items()):
            out += _commands(sub, f"{prefix} {name}")
    return out


def test_every_command_and_option_is_in_the_commands_page(site):
    html = (site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    for path, cmd in _commands(cli):
        assert path in html, path
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in html, f"{path} {opt}"


def _schema_fields(schema: dict, node: dict, prefix: str, out: set[str]) -> None:
    """Every property path of the schema (``site.pue``, ``workloads.train[].tokens``, ...)."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].split("/")[-1]]
    for alt in node.get("anyOf", []):
        _schema_fields(schema, alt, prefix, out)
    for key, sub in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        _schema_fields(schema, sub, path, out)
    if isinstance(node.get("items"), dict):
        _schema_fields(schema, node["items"], prefix + "[]", out)
    if isinstance(node.get("additionalProperties"), dict):
        _schema_fields(schema, node["additionalProperties"], prefix + ".<id>", out)


def _listed_fields(markdown: str) -> set[str]:
    """``section.field`` for every row of every section table of the reference page."""
    out: set[str] = set()
    section = None
    for line in markdown.splitlines():
        if line.startswith("## "):
            m = re.match(r"## `([^`]+)`", line)
            section = m.group(1) if m else ""
        elif section is not None and (m := re.match(r"\| `([^`]+)` \|", line)):
            out.add(f"{section}.{m.group(1)}" if section else m.group(1))
    return out


def test_the_field_reference_lists_every_field_the_schema_has():
    page, _ = _generator().problem_file_page()
    expected: set[str] = set()
    schema = problem_schema()
    _schema_fields(schema, schema, "", expected)
    listed = _listed_fields(page)
    assert expected - listed == set()
    assert listed - expected == set()
    assert "workloads.train[].tokens" in listed


def test_the_field_reference_gives_type_range_default_and_description():
    page, _ = _generator().problem_file_page()
    row = next(r for r in page.splitlines() if r.startswith("| `pue` |"))
    assert "number" in row and "1 to 3" in row and "`1.3`" in row
    row = next(r for r in page.splitlines() if r.startswith("| `tokens` |") and "2T" in r)
    assert "**required**" in row
    row = next(r for r in page.splitlines() if r.startswith("| `method` |"))
    assert "`lora`" in row and "any case" in row


def test_the_exit_codes_page_has_every_exit_code():
    page = _generator().exit_codes_page()
    for code in ExitCode:
        assert f"| {int(code)} | `{code.name}` |" in page
    assert "`InputError`" in page and "`InfeasibleError`" in page


def test_the_benchmarks_page_is_benchmarks_readme():
    page = _generator().benchmarks_page()
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert text.partition("\n")[2] in page


def test_the_readme_is_short_and_its_two_commands_come_first():
    lines = README.splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move detail into docs/"
    assert lines[2] == "```bash"
    assert lines[3].startswith("pip install -c constraints.txt -e . && planner solve problems/")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert lines[4].split("  #")[0].rstrip() == ci.replace("pip install -q ", "pip install ")
    assert '".[test,cluster,docs,ui]"' in ci  # CI builds the docs and tests the web page
    assert "-c constraints.txt" in ci  # CI installs the locked versions (issue 43)


def test_the_readme_links_into_the_docs():
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).exists(), link


def test_the_readme_python_example_is_the_library_docstring_example():
    """README.md's ```python block is planner/__init__.py's doctest as a script (that doctest
    runs with the suite; tests/test_readme_example.py runs the README's copy)."""
    import planner
    from tests.test_readme_example import first_python_block

    assert first_python_block(README) == _generator().example_code(planner.__doc__)


def test_the_generator_doctests_pass():
    import doctest

    result = doctest.testmod(_generator())
    assert result.attempted >= 3 and result.failed == 0


def test_the_annotated_problem_file_is_a_valid_problem():
    """The guide's whole-file example (every section, annotated) is what the planner and the
    schema accept, so the guide cannot teach a key that does not exist."""
    import jsonschema
    import yaml

    from planner.inputs.schema import Problem

    guide = (ROOT / "docs" / "guides" / "your-problem.md").read_text(encoding="utf-8")
    block = re.search(r"^```yaml\n(.*?)^```", guide, re.MULTILINE | re.DOTALL)
    assert block and "workloads:" in block.group(1)
    data = yaml.safe_load(block.group(1))
    Problem.model_validate(data)
    jsonschema.validate(data, problem_schema())
