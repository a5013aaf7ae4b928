"""Seeded SQL mutations for the fuzz test (tests/test_sql_fuzz.py) and benchmarks/fuzz.py.

The corpus is the SQL under tests/data/sql (scripts, statement cases with their dialects, the TPC-H
queries copied from ../shared/bench). :func:`mutants` yields ``(dialect, sql)`` pairs: each a corpus text
with one to three mutations (token deletion, duplication, swap, truncation, random unicode including lone
surrogates and NUL, deep nesting, huge literals, unbalanced quotes, long dotted names, repeated statements
ending in an open quote). The same seed gives the same inputs, always.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

DATA = Path(__file__).parent / "data" / "sql"
DIALECTS = ("ansi", "tsql", "mysql", "postgres", "bigquery", "snowflake", "hive", "oracle", "spark")
_BY_NAME = {"star": "ansi", "bigquery": "bigquery", "hive": "hive", "snowflake": "snowflake", "tsql": "tsql"}


def corpus() -> list[tuple[str, str]]:
    """(dialect, sql) of every SQL text under tests/data/sql, in a fixed order."""
    out: list[tuple[str, str]] = []
    for path in sorted(DATA.glob("*.sql")):
        out.append((_BY_NAME.get(path.stem.split("_")[0], "ansi"), path.read_text(encoding="utf-8")))
    cases = json.loads((DATA / "statements" / "cases.json").read_text(encoding="utf-8"))["cases"]
    for case_id in sorted(cases):
        sql_file = DATA / "statements" / f"{case_id}.sql"
        if sql_file.exists():
            out.append((cases[case_id]["dialect"], sql_file.read_text(encoding="utf-8")))
    for line in (DATA / "bad_input" / "tpch_queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(("ansi", json.loads(line)["sql"]))
    return out


_TOKEN = re.compile(r"\s+|\w+|'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*|.", re.S)
_ODD = [
    "\x00",
    "\ud800",
    "\udfff",
    "\u202e",
    "\ufeff",
    "\u0301",
    "\U0001f600",
    "\x07",
    "\u2028",
    "€",
    "ß",
    "İ",
]
_OPENERS = ["'", '"', "`", "[", "(", "/*", "$$", "$tag$", "--", "#", "N'", "q'[", "E'", "'''"]


def _delete(rng: random.Random, toks: list[str]) -> list[str]:
    if toks:
        del toks[rng.randrange(len(toks))]
    return toks


def _duplicate(rng: random.Random, toks: list[str]) -> list[str]:
    if toks:
        i = rng.randrange(len(toks))
        toks[i:i] = [toks[i]] * rng.randint(1, 3)
    return toks


def _swap(rng: random.Random, toks: list[str]) -> list[str]:
    if len(toks) > 1:
        i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
        toks[i], toks[j] = toks[j], toks[i]
    return toks


def _truncate(rng: random.Random, toks: list[str]) -> list[str]:
    text = "".join(toks)
    return [text[: rng.randrange(len(text) + 1)]]


def _unicode(rng: random.Random, toks: list[str]) -> list[str]:
    for _ in range(rng.randint(1, 4)):
        c = rng.choice(_ODD) if rng.random() < 0.6 else chr(rng.randrange(0x110000))
        toks.insert(rng.randrange(len(toks) + 1), c)
    return toks


def _nest(rng: random.Random, toks: list[str], depth: int) -> list[str]:
    i = rng.randrange(len(toks) + 1)
    d = rng.randint(depth // 10, depth)
    close = d if rng.random() < 0.7 else rng.randrange(d + 1)
    toks[i:i] = ["(" * d, "1", ")" * close]
    return toks


def _literal(rng: random.Random, toks: list[str], size: int) -> list[str]:
    i = rng.randrange(len(toks) + 1)
    body = rng.choice(["x", "ab", "é", "''", " "]) * rng.randint(size // 10, size)
    toks.insert(i, f"'{body}'" if rng.random() < 0.8 else f"'{body}")
    return toks


def _unbalanced(rng: random.Random, toks: list[str]) -> list[str]:
    toks.insert(rng.randrange(len(toks) + 1), rng.choice(_OPENERS))
    return toks


def _dotted(rng: random.Random, toks: list[str], depth: int) -> list[str]:
    toks.insert(rng.randrange(len(toks) + 1), " " + ".".join(["a"] * rng.randint(2, depth)) + " ")
    return toks


def _statements(rng: random.Random, toks: list[str], depth: int) -> list[str]:
    toks.append(";" + "SELECT 1;" * rng.randint(1, depth) + rng.choice(_OPENERS))
    return toks


Mutation = Callable[[random.Random, list[str]], list[str]]


def mutations(scale: int) -> list[Mutation]:
    """Every mutation; ``scale`` bounds nesting depth, literal size and repetition (1 = the test's sizes)."""
    return [
        _delete,
        _duplicate,
        _swap,
        _truncate,
        _unicode,
        _unbalanced,
        lambda r, t: _nest(r, t, 400 * scale),
        lambda r, t: _literal(r, t, 10_000 * scale),
        lambda r, t: _dotted(r, t, 500 * scale),
        lambda r, t: _statements(r, t, 200 * scale),
    ]


def mutants(count: int, seed: int = 11, scale: int = 1, max_len: int = 1500) -> Iterator[tuple[str, str]]:
    """``count`` mutated inputs: ``(dialect, sql)``. Corpus texts are cut to ``max_len`` characters first
    (at a statement end when there is one) so that the run time goes into the mutations."""
    rng = random.Random(seed)
    texts = corpus()
    muts = mutations(scale)
    for n in range(count):
        dialect, sql = texts[n % len(texts)]
        if n % 3 == 1:
            dialect = DIALECTS[rng.randrange(len(DIALECTS))]
        if len(sql) > max_len:
            cut = sql.rfind(";", 0, max_len)
            sql = sql[: cut if cut > 0 else max_len]
        toks = _TOKEN.findall(sql)
        for _ in range(rng.randint(1, 3)):
            toks = rng.choice(muts)(rng, toks)
        yield dialect, "".join(toks)
