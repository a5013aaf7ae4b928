"""MkDocs hook: the configuration and command-line references, generated from the code at build time.

``docs/reference/configuration.md`` and ``docs/reference/cli.md`` hold a marker line each
(``<!-- generated: settings -->``, ``<!-- generated: cli -->``) that this hook replaces with tables made
from :class:`atlas_bridge.config.Settings` and the click commands, so neither can drift from the code.
``tests/test_docs.py`` checks that every setting and every option is in them.
"""

from __future__ import annotations

import ast
import inspect
import itertools
from typing import Any

MARKERS = {
    "<!-- generated: settings -->": "settings_reference",
    "<!-- generated: cli -->": "cli_reference",
}


def _field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string right under a field), read from the class's source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for stmt, nxt in itertools.pairwise(body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("``", "`")


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        return "(none)" if value in ([], {}, None) else f"`{value}`"
    if field.default is None:
        return "(none)"
    return f"`{field.default}`"


def settings_reference() -> str:
    from atlas_bridge.config import PROPERTY_KEYS, Settings

    keys: dict[str, list[str]] = {}
    for key, name in PROPERTY_KEYS.items():
        keys.setdefault(name, []).append(key)
    keys.setdefault("namespace", []).extend(["atlas.metadata.namespace", "atlas.cluster.name"])
    docs = _field_docs(Settings)
    lines = [
        "| setting | default | environment variable | properties key (Spark conf: `spark.` + key)"
        " | what it is |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        env = f"`ATLAS_BRIDGE_{name.upper()}`"
        props = ", ".join(f"`{k}`" for k in keys.get(name, [])) or "-"
        lines.append(f"| `{name}` | {_default(field)} | {env} | {props} | {_cell(docs.get(name, ''))} |")
    return "\n".join(lines)


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    import click

    out: list[tuple[tuple[str, ...], Any]] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        out.append(((*path, name), cmd))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, (*path, name)))
    return out


def cli_reference() -> str:
    import click

    from atlas_bridge.cli import cli

    parts: list[str] = []
    for path, cmd in _commands(cli):
        if isinstance(cmd, click.Group):
            parts.append(f"## atlas-bridge {' '.join(path)}\n\n{_cell(cmd.help or '')}\n")
            continue
        ctx = click.Context(cmd, info_name=" ".join(("atlas-bridge", *path)))
        usage = cmd.collect_usage_pieces(ctx)
        help_text = inspect.cleandoc(cmd.help or "").replace("``", "`")
        parts.append(f"## atlas-bridge {' '.join(path)}\n")
        help_text = "\n".join(line for line in help_text.splitlines() if line.strip() != "\b")
        parts.append(f"```text\natlas-bridge {' '.join(path)} {' '.join(usage)}\n\n{help_text}\n```\n")
        rows = ["| option | default | what it does |", "| --- | --- | --- |"]
        for param in cmd.params:
            if not isinstance(param, click.Option):
                continue
            names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            default = param.get_default(ctx, call=False)
            default = None if callable(default) or type(default).__name__ == "Sentinel" else default
            shown = (
                "-" if default in (None, False, (), "") or (param.is_flag and not default) else f"`{default}`"
            )
            if isinstance(param.type, click.Choice):
                names += " (" + " \\| ".join(f"`{c}`" for c in param.type.choices) + ")"
            rows.append(f"| {names} | {shown} | {_cell(param.help or '')} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def fill(markdown: str) -> str:
    """The page with its markers replaced by the generated text."""
    for marker, name in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, globals()[name]())
    return markdown


def on_page_markdown(markdown: str, **kwargs: Any) -> str:  # MkDocs's hook
    return fill(markdown)
