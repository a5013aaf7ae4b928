"""Every command and code example in the README and the docs runs, or says why it cannot.

The convention (for every page, including pages this file has never seen: README.md, docs/**/*.md and
benchmarks/README.md are collected by glob):

* a fenced ``console`` block whose lines start with ``$ `` is runnable: each ``$ `` command (a line ending
  in ``\\`` continues on the next) runs with bash from a folder that looks like the repository root
  (``examples/`` and ``tests/data/`` are there), with the project's venv first on PATH and no Atlas
  configured; it must exit 0, and the lines shown under it must appear in its output;
* a ``python`` block is run the same way;
* a ``bash`` / ``sh`` / ``shell`` block, or any of the above that cannot run (it needs an Atlas, a cluster,
  or installs something), has ``<!-- not-runnable: why -->`` on the line before its opening fence.

Blocks that start Spark (``atlas-bridge scan``, ``spark-submit``, ``pyspark``) are marked ``spark``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    p
    for p in {ROOT / "README.md", ROOT / "benchmarks" / "README.md", *ROOT.glob("docs/**/*.md")}
    if p.is_file()
)
RUNNABLE = {"console", "python", "py"}
COMMANDS = {"bash", "sh", "shell", "zsh", "shell-session"}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_MARK = re.compile(r"<!--\s*not-runnable:\s*(?P<why>.*?)\s*-->")
_SPARK = re.compile(r"\batlas-bridge\s+scan\b|\bspark-submit\b|\bpyspark\b|ATLAS_BRIDGE_SPARK_HOOK|spark_job")
_TIMEOUT_S = 600


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    mark: str | None
    """The ``not-runnable`` reason on the line before the fence (None: none)."""
    commands: list[tuple[str, list[str]]] = field(default_factory=list)
    """Console blocks: (command, the output lines shown under it)."""

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page (fences may be indented, as in list items)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, lang = m["indent"], m["fence"], m["lang"].lower()
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.search(before)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        block = Block(page, i + 1, lang, "\n".join(body) + "\n", mark["why"] if mark else None)
        if lang == "console":
            block.commands = _console_commands(body)
        blocks.append(block)
        i = j + 1
    return blocks


def _console_commands(body: list[str]) -> list[tuple[str, list[str]]]:
    commands: list[tuple[str, list[str]]] = []
    k = 0
    while k < len(body):
        line = body[k]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and k + 1 < len(body):
                k += 1
                command = command[:-1] + "\n" + body[k]
            commands.append((command, []))
        elif line.strip() and commands:
            commands[-1][1].append(line.strip())
        k += 1
    return commands


ALL_BLOCKS = [b for page in PAGES for b in parse_blocks(page)]


def _runnable(block: Block) -> bool:
    return block.mark is None and block.lang in RUNNABLE


def _param(block: Block) -> object:
    marks = [pytest.mark.spark] if _SPARK.search(block.text) else []
    return pytest.param(block, id=block.name, marks=marks)


def test_every_command_block_runs_or_says_why_not() -> None:
    problems = []
    for b in ALL_BLOCKS:
        if b.mark is not None and not b.mark.strip():
            problems.append(f"{b.name}: not-runnable needs a reason")
        if b.mark is None and b.lang in COMMANDS:
            problems.append(
                f"{b.name}: a {b.lang} block: make it a console block ($ lines) or mark it not-runnable"
            )
        if _runnable(b) and b.lang == "console" and not b.commands:
            problems.append(f"{b.name}: a console block without a '$ ' command")
    assert problems == []


def test_the_pages_have_runnable_examples() -> None:
    """The collection itself works: the README and the docs hold examples it runs."""
    pages = {b.page.name for b in ALL_BLOCKS if _runnable(b)}
    assert "README.md" in pages
    assert len([b for b in ALL_BLOCKS if _runnable(b)]) >= 5


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A folder that looks like the repository root for the examples (nothing they write lands in it)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_BRIDGE_") and k != "ATLAS_CONF"}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["NO_MKDOCS_2_WARNING"] = "1"
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )


@pytest.mark.parametrize("block", [_param(b) for b in ALL_BLOCKS if _runnable(b)])
def test_example_runs(block: Block, workspace: Path) -> None:
    if block.lang in ("python", "py"):
        done = _run([sys.executable, "-c", block.text], workspace)
        assert done.returncode == 0, f"{block.name}\n{done.stdout}\n{done.stderr}"
        return
    for command, shown in block.commands:
        done = _run(["bash", "-c", command], workspace)
        assert done.returncode == 0, f"{block.name}: {command}\n{done.stdout}\n{done.stderr}"
        # lines as a terminal would show them: Spark's progress bar rewrites its line with carriage returns
        printed = {line.strip() for line in re.split(r"[\r\n]+", done.stdout + "\n" + done.stderr)}
        missing = [line for line in shown if line != "..." and line not in printed]
        assert missing == [], f"{block.name}: {command} did not print {missing}\n{done.stdout}\n{done.stderr}"


# --- the generated references -----------------------------------------------------------------------------


def _reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_holds_every_setting() -> None:
    from atlas_bridge.config import PROPERTY_KEYS, Settings

    text = _reference().settings_reference()
    for name in Settings.model_fields:
        assert f"`ATLAS_BRIDGE_{name.upper()}`" in text, name
    for key in PROPERTY_KEYS:
        assert f"`{key}`" in text, key
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert "<!-- generated: settings -->" in page


def test_the_cli_reference_holds_every_command_and_option() -> None:
    from atlas_bridge.cli import cli

    text = _reference().cli_reference()

    def walk(group: click.Group, path: tuple[str, ...]) -> None:
        for name, cmd in group.commands.items():
            assert f"## atlas-bridge {' '.join((*path, name))}\n" in text, name
            if isinstance(cmd, click.Group):
                walk(cmd, (*path, name))
                continue
            for param in cmd.params:
                if isinstance(param, click.Option):
                    assert f"`{param.opts[0]}`" in text, (name, param.opts)

    walk(cli, ())
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "<!-- generated: cli -->" in page


def test_mkdocs_runs_the_reference_hook() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs/hooks/reference.py" in config
    filled = _reference().fill("a\n<!-- generated: settings -->\n<!-- generated: cli -->\n")
    assert "<!-- generated" not in filled
    assert "ATLAS_BRIDGE_REST_ADDRESS" in filled


def test_the_readme_is_short_and_free_of_project_internals() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 220
    assert re.search(r"\bissue\s+\d+|\(#\d+\)", text, re.IGNORECASE) is None
    assert re.search(r"`[0-9a-f]{7,40}`", text) is None  # commit ids
