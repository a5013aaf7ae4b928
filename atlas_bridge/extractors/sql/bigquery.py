"""BigQuery table names as BigQuery users think of them (issue 31), applied to a statement's tree.

- A partition decorator names a partition of the table, not a table: `` `proj.ds.tbl$20240101` `` and
  ``tbl$__UNPARTITIONED__`` are ``proj.ds.tbl`` (its schema applies, ``*`` expands). A BigQuery table name
  cannot hold a ``$``, so the cut is always right.
- Date-sharded tables (``events_20240101``: a name ending in a ``YYYYMMDD`` date) and wildcard tables
  (``events_*``, ``events_2024*`` with ``_TABLE_SUFFIX``) are one table, named as BigQuery's wildcard names
  all its shards: ``events_*``. The console groups shards the same way (``events_ (31)``); the wildcard
  spelling keeps the group apart from a table that is really named ``events``. ``_TABLE_SUFFIX`` stays a
  (pseudo) column of that table.

Column qualifiers that name a renamed table (``events_20240101.user_id``) are renamed with it.
"""

from __future__ import annotations

import datetime
import re

from sqlglot import exp

_HINT = re.compile(r"[$*]|\d{8}")
"""A statement without any of these holds no decorated, sharded or wildcard table name (a cheap test)."""
_SHARD = re.compile(r"(.*\D)(\d{4})(\d{2})(\d{2})")
_PARTIAL = re.compile(r"(.*_)\d{1,7}\*")


def grouped_name(name: str) -> str:
    """The table a BigQuery table name reads or writes (the name itself when it is a plain table).

    >>> [grouped_name(n) for n in ("tbl$20240101", "events_20240101", "events_2024*", "events_*", "t2024")]
    ['tbl', 'events_*', 'events_*', 'events_*', 't2024']
    """
    cut = name.find("$")
    if cut > 0:
        return name[:cut]
    if name.endswith("*"):
        partial = _PARTIAL.fullmatch(name)
        return f"{partial.group(1)}*" if partial else name
    shard = _SHARD.fullmatch(name)
    if shard is None or not shard.group(1).strip("_"):
        return name
    try:
        datetime.date(int(shard.group(2)), int(shard.group(3)), int(shard.group(4)))
    except ValueError:
        return name
    return f"{shard.group(1)}*"


def group_tables(stmt: exp.Expr, sql: str) -> None:
    """Rename, in place, every table of the statement to the table BigQuery users mean (see the module)."""
    if _HINT.search(sql) is None:
        return
    renamed: dict[str, str] = {}
    ctes = {cte.alias.lower() for cte in stmt.find_all(exp.CTE)}
    for table in stmt.find_all(exp.Table):
        ident = table.args.get("this")
        if not isinstance(ident, exp.Identifier) or (not table.args.get("db") and ident.name.lower() in ctes):
            continue
        name = ident.name
        new = grouped_name(name)
        if new != name:
            ident.set("this", new)
            renamed[name.lower()] = new
    if not renamed:
        return
    for col in stmt.find_all(exp.Column):
        qual = col.args.get("table")
        if isinstance(qual, exp.Identifier) and qual.name.lower() in renamed:
            qual.set("this", renamed[qual.name.lower()])
