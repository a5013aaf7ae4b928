"""The column resolver: one pass over a statement's syntax tree, no sqlglot ``qualify``.

:class:`StatementContext` holds everything one statement needs (script state, graph under construction,
positions) and the core helpers a statement handler calls:

- :meth:`StatementContext.query_lineage` - lineage of a query expression (SELECT, set operation, VALUES,
  with its CTEs and subqueries) into a resultset; returns a :class:`QueryResult`.
- :meth:`StatementContext.table` - the dataset of a table reference (``exp.Table``).
- :meth:`StatementContext.write_into` - the resultset -> target edges of a statement that writes.
- :meth:`StatementContext.begin_process` - the statement's process (call it before walking the query so
  resultsets are scoped to the process id).

Lineage rules (seed 000/001/002): select-list columns feed their output column (``fdd``, CASE conditions
included); WHERE, JOIN ON, GROUP BY, HAVING and QUALIFY columns feed the resultset's ``PseudoRows`` as
``fdr``; window PARTITION/ORDER columns feed their output column as ``fdr`` (clause window); aggregate
outputs also get the WHERE/GROUP BY/HAVING columns, and without GROUP BY the FROM sources' ``PseudoRows``;
``COUNT(*)`` is fed by the FROM sources' ``PseudoRows``; a FROM-clause subquery or CTE passes its
``PseudoRows`` on (``fdd``, clause select).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql.builder import ColKey, DatasetBuilder, EndKey, GraphBuilder, with_field
from atlas_bridge.extractors.sql.nested import PATH_NODES, built_fields, field_path, struct_fields, tuple_keys
from atlas_bridge.extractors.sql.schema import SchemaIndex
from atlas_bridge.extractors.sql.split import LineIndex
from atlas_bridge.model import (
    ORPHAN_TABLE,
    PSEUDO_ROWS,
    ClauseType,
    DatasetKind,
    Effect,
    FlowKind,
    Problem,
    Process,
    RelationType,
    Severity,
    Span,
    dataset_id,
    query_hash,
)

FDD = RelationType.FDD
FDR = RelationType.FDR


class StatementTimeout(Exception):
    """The statement used up its time budget."""


class UnsupportedSQL(Exception):
    """A construct the extractor does not handle (reported, the statement is skipped)."""


@dataclass
class ScriptState:
    """What outlives one statement: numbering, the schema grown by DDL, column spellings."""

    schema: SchemaIndex
    dialect: Dialect
    text: str
    lines: LineIndex
    file: str | None = None
    default_db: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    spelling: dict[tuple[str, str], str] = field(default_factory=dict)
    hashes_seen: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    procedure: str | None = None
    """Procedure the statements being analysed sit in (set by the procedural-block handler)."""
    resolve_variable: Callable[[exp.Expr], ColKey | None] | None = None
    """Inside a procedural block: the variable column a Column/Parameter names, else None."""
    generator: Generator | None = None
    """The dialect's SQL generator for expression texts, made once per script (see :func:`_sql`)."""


# ---------------------------------------------------------------------------------------------------------
# Query results and FROM-clause sources


@dataclass(slots=True)  # many per statement: slots make them cheaper to build and to collect
class Ref:
    """One column occurrence found in an expression, resolved to a dataset column (or a field of one)."""

    key: EndKey
    span: Span | None = None
    agg: bool = False
    window: bool = False
    rows: bool = False
    """A subquery's or source's PseudoRows (row-count influence, never a value)."""
    func: str | None = None
    orphan: bool = False
    count_star: bool = False
    clause: ClauseType | None = None
    """An fdr into the output column from this clause (e.g. an aggregate's FILTER condition)."""
    window_agg: bool = False
    """An argument of a window aggregate (``SUM(x) OVER (...)``): a value, effect AGGREGATION."""
    partial: bool = False
    """A bare column argument of ``COALESCE``: a copy for the rows it is chosen in (PARTIAL_COPY when the
    output is the COALESCE itself)."""


class QueryResult:
    """A resultset built from a query: its dataset and its output columns in order.

    ``extra`` resolves a column name the resultset does not list yet (a ``*`` over a table without
    schema, a CTE over such a query...): it adds the column with its lineage and returns it, or None.
    """

    def __init__(self, ds: DatasetBuilder, columns: list[str] | None = None) -> None:
        self.ds = ds
        self.columns: list[str] = columns or []
        self._index: dict[str, str] = {c.lower(): c for c in self.columns}
        self.extra: Callable[[str, Span | None], str | None] | None = None

    def add_output(self, name: str) -> str:
        """Add an output column, renaming a duplicate (``id``, ``id_2``...) so positions stay distinct."""
        base, n = name, 1
        while name.lower() in self._index:
            n += 1
            name = f"{base}_{n}"
        self.columns.append(name)
        self._index[name.lower()] = name
        return self.ds.column(name)

    def set_columns(self, names: list[str]) -> None:
        self.columns = []
        self._index = {}
        for n in names:
            self.add_output(n)

    def has(self, name: str) -> bool | None:
        """True: listed; None: may exist (open); False: does not."""
        if name.lower() in self._index:
            return True
        return None if self.extra is not None else False

    def lookup(self, name: str, span: Span | None = None) -> ColKey | None:
        col = self._index.get(name.lower())
        if col is not None:
            return (self.ds.id, col)
        if self.extra is not None:
            got = self.extra(name, span)
            if got is not None:
                if got.lower() not in self._index:
                    self._index[got.lower()] = got
                return (self.ds.id, got)
        return None

    @property
    def rows_key(self) -> ColKey:
        return (self.ds.id, PSEUDO_ROWS)


def _no_such_column(written: str, src: Source) -> str:
    """Why a column of a known table is an orphan (a view's or CTAS table's definition says which it has)."""
    if not src.closed:
        return f"{written} has no such column"
    table = ".".join(p for p in (src.ds.catalog, src.ds.db, src.ds.name) if p)
    shown = table if written.lower() in (table.lower(), src.ds.name.lower()) else f"{written} ({table})"
    return f"{shown} has no such column in its definition (a view or CREATE TABLE AS SELECT)"


@dataclass(slots=True)
class Source:
    """Something in FROM: a table (``query`` None) or a resultset (CTE, subquery, function)."""

    alias: str
    ds: DatasetBuilder
    names: tuple[str, ...]
    known: dict[str, str] | None = None
    """Table columns from the schema (lower -> spelling, in order); None = unknown (any name accepted)."""
    query: QueryResult | None = None
    rename: dict[str, str] | None = None
    """Alias column list of a derived table: alias column (lower) -> underlying output column."""
    rename_names: tuple[str, ...] = ()
    types: dict[str, str | None] | None = None
    """Column types from the schema (lower name -> type), recorded on the columns used."""
    closed: bool = False
    """A view or CTAS table whose definition is known: its columns are the definition's, and a read of any
    other is an orphan column with a warning (not a new column of it)."""

    def has(self, name: str) -> bool | None:
        return self.has_lower(name.lower())

    def has_lower(self, low: str) -> bool | None:
        """:meth:`has` of a name already lower-cased (a scope's look-up asks each of its sources)."""
        if self.rename is not None:
            return True if low in self.rename else (None if self.query and self.query.extra else False)
        query = self.query
        if query is not None:
            return True if low in query._index else (None if query.extra is not None else False)
        if self.known is None:
            return None
        return low in self.known

    def column(self, name: str, span: Span | None, *, force: bool = False) -> ColKey | None:
        low = name.lower()
        if self.rename is not None and low in self.rename:
            name = self.rename[low]
        if self.query is not None:
            return self.query.lookup(name, span)
        if self.known is not None and low in self.known:
            col = self.ds.column(self.known[low], span)
            if self.types and self.types.get(low) and self.ds.columns[low].data_type is None:
                self.ds.columns[low].data_type = self.types[low]
            return (self.ds.id, col)
        if self.known is None or (force and not self.closed):
            return (self.ds.id, self.ds.column(name, span))
        return None

    def column_list(self) -> list[str] | None:
        """Output columns in order when known (for ``*``), else None."""
        if self.rename is not None:
            return list(self.rename_names)
        if self.query is not None:
            return [c for c in self.query.columns if c != "*"]
        if self.known is not None:
            return list(self.known.values())
        return None

    def is_open(self) -> bool:
        if self.query is not None:
            return self.query.extra is not None or "*" in self.query.columns
        return self.known is None

    @property
    def rows_key(self) -> ColKey:
        return (self.ds.id, PSEUDO_ROWS)


class Scope:
    """Name resolution for one SELECT: its FROM sources, visible CTEs, aliases, and the enclosing scope."""

    def __init__(self, parent: Scope | None, ctes: dict[str, QueryResult]) -> None:
        self.parent = parent
        self.ctes = ctes
        self.sources: list[Source] = []
        self.using: set[str] = set()
        self.nested_joins: list[exp.Join] = []
        """Joins inside a parenthesised FROM item (``FROM (a JOIN b ON ...)``), flattened into this scope."""

    def find(self, qual: tuple[str, ...]) -> Source | None:
        """The source a qualifier (``a``, ``t``, ``db.t``) names."""
        full = ".".join(qual)
        last = qual[-1]
        for src in self.sources:
            if src.alias == full or (src.alias == last and len(qual) == 1):
                return src
        for src in self.sources:
            if full in src.names:
                return src
        if len(qual) > 1:
            for src in self.sources:
                if last in src.names:
                    return src
        return None


_AMBIGUOUS = object()


# ---------------------------------------------------------------------------------------------------------


class StatementContext:
    """One statement being analysed. Handlers receive it; see the module docstring for its helpers."""

    def __init__(
        self,
        state: ScriptState,
        *,
        index: int,
        start: int,
        end: int,
        deadline: float | None,
    ) -> None:
        self.state = state
        self.index = index
        self.start = start
        self.end = end
        self.sql = state.text[start:end]
        self.graph = GraphBuilder()
        self.deadline = deadline
        self._ticks = 0
        self.problems: list[Problem] = []
        self.dialect = state.dialect
        self._lateral_ok = type(state.dialect).__name__.lower() in LATERAL_ALIAS_DIALECTS
        self._implicit_recursion = type(state.dialect).__name__.lower() in IMPLICIT_RECURSION_DIALECTS
        self._names_by = _naming_engine(state.dialect)
        self.query_hash = query_hash(self.sql)
        self.key = _statement_key(state, self.query_hash)
        self.process_id: str | None = None
        self.scope_id = f"query:{self.key}"
        self.effect_type = "select"
        self._names_used: set[str] = set()
        self._orphans_warned: set[tuple[str, Span | None]] = set()
        self.tokens: list[Token] | None = None
        """The statement's tokens, when its tree was parsed from them alone (post hooks may skip a tree
        walk that the tokens show would find nothing)."""
        self.kinds: list[TokenType] | None = None
        """Those tokens' types, when the split read them (else read off :attr:`tokens` when needed)."""

    # -- bookkeeping ----------------------------------------------------------------------------------

    def check(self) -> None:
        """Cooperative time-budget check (cheap; call it in loops)."""
        self._ticks += 1
        if self.deadline is not None and not self._ticks & 31 and time.monotonic() > self.deadline:
            msg = "time budget exceeded"
            raise StatementTimeout(msg)

    def span_of(self, node: exp.Expr | None) -> Span | None:
        """File span of a node whose tokens carry positions (identifiers, columns, tables)."""
        if node is None:
            return None
        meta = node.meta if isinstance(node, exp.Identifier) else None
        if meta is None or "start" not in meta:
            this = node.args.get("this")  # node.this without the property's call (hot path)
            ident = this if isinstance(this, exp.Identifier) else node.find(exp.Identifier)
            if ident is None:
                return None
            meta = ident.meta
            if "start" not in meta:
                return None
        return self.state.lines.span(int(meta["start"]), int(meta["end"]) + 1)

    def statement_span(self) -> Span:
        return self.state.lines.span(self.start, self.end)

    def warn(self, message: str, *, kind: str, span: Span | None = None) -> None:
        sp = span or self.statement_span()
        self.problems.append(
            Problem(
                message=message,
                severity=Severity.WARNING,
                kind=kind,
                file=self.state.file,
                statement_index=self.index,
                line=sp.line,
                column=sp.column,
            )
        )

    def next_number(self, prefix: str) -> int:
        n = self.state.counters.get(prefix, 0) + 1
        self.state.counters[prefix] = n
        return n

    def begin_process(self, ptype: str, name: str, *, effect_type: str) -> str:
        """Create this statement's process; resultsets built afterwards are scoped to it."""
        pid = f"process:{self.key}"
        self.graph.processes.append(
            Process(
                id=pid,
                type=ptype,
                name=name,
                query_hash=self.query_hash,
                statement_index=self.index,
                sql=self.sql,
                span=self.statement_span(),
                source_file=self.state.file,
                procedure=self.state.procedure,
            )
        )
        self.process_id = pid
        self.scope_id = pid
        self.effect_type = effect_type
        return pid

    def resultset(self, name: str, sub_type: str, alias: str | None = None) -> DatasetBuilder:
        """A new statement-local resultset (name made unique within the statement)."""
        base, n = name, 1
        while name.lower() in self._names_used:
            n += 1
            name = f"{base}-{n}"
        self._names_used.add(name.lower())
        ds = DatasetBuilder(
            id=dataset_id(DatasetKind.RESULTSET, name, scope=self.scope_id),
            kind=DatasetKind.RESULTSET,
            name=name,
            sub_type=sub_type,
            alias=alias,
        )
        return self.graph.dataset(ds)

    def numbered_resultset(self, prefix: str, sub_type: str, alias: str | None = None) -> DatasetBuilder:
        return self.resultset(f"{prefix}-{self.next_number(prefix)}", sub_type, alias)

    def orphan(self, name: str, span: Span | None, reason: str) -> ColKey:
        """Park a column no table can be found for on the pseudo table (never a guess)."""
        ds = self.graph.dataset(
            DatasetBuilder(
                id=dataset_id(DatasetKind.PSEUDO_TABLE, ORPHAN_TABLE),
                kind=DatasetKind.PSEUDO_TABLE,
                name=ORPHAN_TABLE,
            )
        )
        if (name.lower(), span) not in self._orphans_warned:  # a column resolved twice warns once
            self._orphans_warned.add((name.lower(), span))
            self.warn(f"column {name!r} cannot be placed: {reason}", kind="orphan_column", span=span)
        return (ds.id, ds.column(name, span))

    # -- tables ---------------------------------------------------------------------------------------

    def table(self, table: exp.Table, kind: DatasetKind = DatasetKind.TABLE) -> DatasetBuilder:
        """The permanent dataset a table reference names (db defaults to the script's default db)."""
        name = _table_name(table)
        db = _part_text(table, "db") or self.state.default_db or None
        catalog = _part_text(table, "catalog") or None
        ds = self.graph.dataset(
            DatasetBuilder(
                id=dataset_id(kind, name, db, catalog),
                kind=kind,
                name=name,
                db=db,
                catalog=catalog,
            )
        )
        if kind is DatasetKind.VIEW:
            ds.kind = DatasetKind.VIEW
        span = self.span_of(table)
        if span is not None and len(ds.spans) < 8:
            ds.spans.append(span)
        alias = table.alias
        if alias and ds.alias is None:
            ds.alias = alias
        return ds

    def table_columns(self, table: exp.Table) -> list[tuple[str, str | None]] | None:
        return self.state.schema.columns(
            table.catalog or None, table.db or self.state.default_db or None, table.name
        )

    def table_in_order(self, table: exp.Table) -> bool:
        return self.state.schema.in_order(
            table.catalog or None, table.db or self.state.default_db or None, table.name
        )

    # -- writing --------------------------------------------------------------------------------------

    def write_into(
        self,
        qr: QueryResult,
        target: DatasetBuilder,
        target_columns: list[str] | None,
        *,
        by_name: bool = False,
    ) -> list[str]:
        """Edges from a resultset into a permanent target; returns the target columns written.

        ``target_columns`` maps by position (an explicit column list or the target's schema); None or
        ``by_name`` writes each output column into the target column of the same name.
        """
        assert self.process_id is not None, "begin_process() first"
        target.process_ids.add(self.process_id)
        outputs = list(qr.columns)
        pairs: list[tuple[str, str]] = []
        if target_columns is None or by_name or "*" in outputs:
            pairs = [(c, c) for c in outputs]
        else:
            if len(outputs) != len(target_columns):
                self.warn(
                    f"{len(outputs)} columns written into {len(target_columns)} columns of {target.name}",
                    kind="resolve",
                )
            pairs = list(zip(outputs, target_columns, strict=False))
        written: list[str] = []
        for src_col, tgt_col in pairs:
            tcol = target.column(tgt_col)
            written.append(tcol)
            self.graph.add(
                FDD,
                (qr.ds.id, src_col),
                (target.id, tcol),
                effect_type=self.effect_type,
                process_id=self.process_id,
                effect=Effect.EXACT_COPY,
            )
        if self.graph.is_fed(qr.rows_key):
            qr.ds.rows()
            self.graph.add(
                FDR,
                qr.rows_key,
                (target.id, target.rows()),
                effect_type=self.effect_type,
                process_id=self.process_id,
            )
        if target.kind in (DatasetKind.TABLE, DatasetKind.VIEW):
            self._type_columns(target, [(s, t) for (s, _), t in zip(pairs, written, strict=True)], qr)
        return written

    def _type_columns(self, target: DatasetBuilder, pairs: list[tuple[str, str]], qr: QueryResult) -> None:
        """Types onto the target columns written (the Atlas column's ``type``): the schema's (or DDL's),
        else the type of the one typed column the value is an exact copy of (a view's ``SELECT a``)."""
        # A CREATE ... AS about to define the target does not read it: not a look-up that shapes lineage.
        creating = self.effect_type in ("create_table", "create_view")
        known = self.state.schema.columns(target.catalog, target.db, target.name, record=not creating)
        types = {c.lower(): t for c, t in known or () if t}
        incoming: dict[ColKey, list[ColKey]] | None = None
        for src, name in pairs:
            col = target.columns.get(name.lower())
            if col is None or col.data_type is not None:
                continue
            if name.lower() in types:
                col.data_type = types[name.lower()]
                continue
            if incoming is None:
                incoming = {}
                for rel in self.graph.relations.values():
                    if (
                        rel.type is FDD
                        and rel.effect is Effect.EXACT_COPY
                        and len(rel.source) == 2
                        and len(rel.target) == 2
                    ):  # (a field's type is not its column's)
                        incoming.setdefault(rel.target, []).append(rel.source)  # type: ignore[arg-type]
            col.data_type = self._copied_type((qr.ds.id, src), incoming)

    def _copied_type(self, key: ColKey, incoming: dict[ColKey, list[ColKey]]) -> str | None:
        """The type every exact-copy chain into ``key`` agrees on (at most 16 hops), else None."""
        frontier, seen, found = [key], {key}, set()
        for _ in range(16):
            nxt: list[ColKey] = []
            for k in frontier:
                ds = self.graph.datasets.get(k[0])
                col = ds.columns.get(k[1].lower()) if ds is not None else None
                if col is not None and col.data_type:
                    found.add(col.data_type)
                    continue
                sources = incoming.get(k, [])
                if not sources:
                    return None  # a chain that ends untyped: the type is not known
                nxt.extend(s for s in sources if s not in seen)
                seen.update(sources)
            frontier = nxt
            if not frontier:
                break
        return found.pop() if len(found) == 1 and not frontier else None

    # -- queries --------------------------------------------------------------------------------------

    def query_lineage(
        self,
        node: exp.Expr,
        parent: Scope | None = None,
        ctes: dict[str, QueryResult] | None = None,
        *,
        alias: str | None = None,
        on_first_branch: Callable[[QueryResult], None] | None = None,
    ) -> QueryResult:
        """Lineage of a query expression into a new resultset (RS-n, a union result...)."""
        self.check()
        if ctes is None:
            ctes = parent.ctes if parent is not None else {}
        if isinstance(node, exp.Subquery):
            ctes = self._with(node, parent, ctes)
            return self.query_lineage(
                node.this, parent, ctes, alias=alias or node.alias or None, on_first_branch=on_first_branch
            )
        if isinstance(node, exp.Select):
            return self._select(node, parent, ctes, alias)
        if isinstance(node, exp.SetOperation):
            return self._set_operation(node, parent, ctes, alias, on_first_branch)
        if isinstance(node, exp.Values):
            return self._values(node, alias)
        if isinstance(node, exp.Paren):
            return self.query_lineage(node.this, parent, ctes, alias=alias, on_first_branch=on_first_branch)
        if isinstance(node, exp.Table):  # ``(x)`` used as a query: SELECT * FROM x
            select = exp.Select(expressions=[exp.Star()], from_=exp.From(this=node))
            return self._select(select, parent, ctes, alias)
        msg = f"unsupported query expression {node.key.upper()}"
        raise UnsupportedSQL(msg)

    def query_ctes(self, node: exp.Expr, parent: Scope | None = None) -> dict[str, QueryResult]:
        """The CTEs a statement's own WITH clause defines (e.g. ``WITH q AS (...) INSERT ...``)."""
        return self._with(node, parent, parent.ctes if parent is not None else {})

    def _with(
        self, node: exp.Expr, parent: Scope | None, ctes: dict[str, QueryResult]
    ) -> dict[str, QueryResult]:
        w = node.args.get("with_")
        if not isinstance(w, exp.With):
            return ctes
        recursive = bool(w.args.get("recursive"))
        out = dict(ctes)
        for cte in w.expressions:
            self.check()
            name = cte.alias
            alias_expr = cte.args.get("alias")
            col_names = [c.name for c in alias_expr.columns] if isinstance(alias_expr, exp.TableAlias) else []
            ds = self.resultset(name, "with_cte")
            cte_qr = QueryResult(ds, list(col_names))
            for c in col_names:
                ds.column(c)
            visible = dict(out)
            if recursive or (self._implicit_recursion and _refers_to_itself(cte.this, name)):
                visible[name.lower()] = cte_qr

            def first(
                branch: QueryResult, cte_qr: QueryResult = cte_qr, named: bool = bool(col_names)
            ) -> None:
                if not named and not cte_qr.columns:
                    cte_qr.set_columns(list(branch.columns))

            body = self.query_lineage(cte.this, parent, visible, on_first_branch=first)
            if not col_names and not cte_qr.columns:
                cte_qr.set_columns(list(body.columns))
            for src_col, tgt_col in zip(body.columns, cte_qr.columns, strict=False):
                self.graph.add(FDD, (body.ds.id, src_col), (ds.id, tgt_col), effect=Effect.EXACT_COPY)
            if body.extra is not None:
                cte_qr.extra = _pass_through(self, body, cte_qr)
            if self.graph.is_fed(body.rows_key):
                self.graph.add(FDD, body.rows_key, (ds.id, ds.rows()), clause_type=ClauseType.SELECT)
            out[name.lower()] = cte_qr
        return out

    def _values(self, node: exp.Values, alias: str | None) -> QueryResult:
        ds = self.numbered_resultset("VALUES", "values", alias or node.alias or None)
        qr = QueryResult(ds)
        alias_expr = node.args.get("alias")
        names = [c.name for c in alias_expr.columns] if isinstance(alias_expr, exp.TableAlias) else []
        if not names and node.expressions:
            first = node.expressions[0]
            width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
            names = [f"column{i + 1}" for i in range(width)]
        for n in names:
            qr.add_output(n)
        return qr

    def _set_operation(
        self,
        node: exp.SetOperation,
        parent: Scope | None,
        ctes: dict[str, QueryResult],
        alias: str | None,
        on_first_branch: Callable[[QueryResult], None] | None,
    ) -> QueryResult:
        # A left-deep chain (``a UNION ALL b UNION ALL c ...``) is walked iteratively, and a run of the
        # same operation becomes one resultset with all its branches: 800 UNIONs do not recurse 800 deep.
        chain = [node]
        while isinstance(chain[-1].this, exp.SetOperation) and not chain[-1].this.args.get("with_"):
            chain.append(chain[-1].this)
        ctes = self._with(node, parent, ctes)
        first = self.query_lineage(chain[-1].this, parent, ctes, on_first_branch=on_first_branch)
        if on_first_branch is not None:
            on_first_branch(first)
        branches = [first]
        current: exp.SetOperation | None = None
        for op in reversed(chain):
            self.check()
            if current is not None and not _same_set_operation(op, current):
                branches = [self._combine(current, branches, None)]
            current = op
            branches.append(self.query_lineage(op.expression, parent, ctes))
        assert current is not None
        return self._combine(current, branches, alias)

    def _combine(self, op: exp.SetOperation, branches: list[QueryResult], alias: str | None) -> QueryResult:
        """One set-operation resultset fed positionally by its branches (names from the first)."""
        kind = type(op).__name__.upper()
        ds = self.numbered_resultset(f"RESULT_OF_{kind}", "select_union", alias)
        qr = QueryResult(ds)
        for name in branches[0].columns:
            qr.add_output(name)
        for branch in branches:
            for src_col, tgt_col in zip(branch.columns, qr.columns, strict=False):
                self.graph.add(FDD, (branch.ds.id, src_col), (ds.id, tgt_col), effect=Effect.EXACT_COPY)
            if self.graph.is_fed(branch.rows_key):
                self.graph.add(FDD, branch.rows_key, (ds.id, ds.rows()), clause_type=ClauseType.SELECT)
        if any(b.extra is not None for b in branches):

            def extra(name: str, span: Span | None) -> str | None:
                found = [k for b in branches if (k := b.lookup(name, span)) is not None]
                if not found:
                    return None
                col = ds.column(name)
                for k in found:
                    self.graph.add(FDD, k, (ds.id, col), effect=Effect.EXACT_COPY)
                return col

            qr.extra = extra
        return qr

    # -- SELECT ---------------------------------------------------------------------------------------

    def _select(
        self, sel: exp.Select, parent: Scope | None, ctes: dict[str, QueryResult], alias: str | None
    ) -> QueryResult:
        ctes = self._with(sel, parent, ctes)
        ds = self.numbered_resultset("RS", "select_list", alias)
        qr = QueryResult(ds)
        scope = Scope(parent, ctes)
        from_ = sel.args.get("from_")
        if isinstance(from_, exp.From):
            self._add_source(scope, from_.this)
        joins = list(sel.args.get("joins") or [])
        for join in joins:
            self._add_source(scope, join.this)
            for ident in join.args.get("using") or []:
                scope.using.add(ident.name.lower())
        joins = scope.nested_joins + joins
        for lateral in sel.args.get("laterals") or []:
            self._add_source(scope, lateral)
        rows_target = (ds.id, PSEUDO_ROWS)

        # Select list ------------------------------------------------------------------------------
        aliases: dict[str, list[Ref]] = {}
        select_aliases = (_SelectListAliases if self._lateral_ok else _LastResortAliases)(aliases)
        agg_cols: list[str] = []
        open_stars: list[Source] = []
        for proj in sel.expressions:
            self.check()
            if isinstance(proj, exp.Star) or (
                isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)
            ):
                self._star(scope, qr, proj, open_stars)
                continue
            if (
                isinstance(proj, exp.Dot)
                and isinstance(proj.expression, exp.Star)
                and self._struct_star(scope, qr, proj, open_stars)
            ):
                continue
            expr = proj.unalias()
            while isinstance(expr, exp.Paren):
                expr = expr.this
            name = (proj.alias if isinstance(proj, exp.Alias) else "") or (
                expr.output_name if isinstance(expr, (exp.Column, exp.Dot)) else ""
            )
            text = None  # the expression's SQL when its name is made of it
            if not name and self._names_by is not None:
                name = _engine_name(expr, self._names_by, self.state)
            if not name:
                text = _sql(expr, self.state)
                name = _text_name(text)
            col = qr.add_output(name)
            refs: list[Ref] = []
            self._collect(expr, scope, refs, lateral=select_aliases)
            aliases.setdefault(name.lower(), refs)
            exact = isinstance(expr, exp.Column)
            transform = None
            if not refs or (exact and not isinstance(proj, exp.Alias)):
                pass  # a plain column, or no column read: no edge carries a transform
            elif text is not None and not exact:
                transform = text  # the expression's SQL, made for its name
            else:
                transform = _sql(proj if exact else expr, self.state)
            is_agg = False
            parts: list[tuple[EndKey, list[Ref], exp.Expr, str | None]] = [
                ((ds.id, col), refs, expr, transform)
            ]
            built = built_fields(expr)
            if built is not None:  # a struct built here: each field from its own expression
                parts = []
                for path, member in built:
                    member_refs: list[Ref] = []
                    self._collect(member, scope, member_refs, lateral=select_aliases)
                    plain = isinstance(member, exp.Column)
                    parts.append(
                        (
                            with_field((ds.id, col), path),
                            member_refs,
                            member,
                            None if plain else _sql(member, self.state),
                        )
                    )
            for target, refs, expr, transform in parts:
                for ref in refs:
                    if ref.count_star:
                        is_agg = is_agg or not ref.window
                        for src in scope.sources:
                            src.ds.rows()
                            self.graph.add(
                                FDR,
                                src.rows_key,
                                (ds.id, col),
                                clause_type=ClauseType.SELECT,
                                flow=FlowKind.DATA_FLOW,
                                effect=Effect.AGGREGATION,
                                transform=transform,
                                function="COUNT",
                            )
                        continue
                    if ref.window or ref.clause is not None:
                        is_agg = is_agg or (ref.window and ref.agg)  # a window key over grouped aggregates
                        clause = ref.clause or ClauseType.WINDOW
                        self.graph.add(FDR, ref.key, (ds.id, col), clause_type=clause, span=ref.span)
                        continue
                    if ref.rows:
                        self.graph.add(FDR, ref.key, (ds.id, col), clause_type=ClauseType.SELECT)
                        continue
                    if ref.agg:
                        is_agg = True
                        effect = Effect.AGGREGATION
                    elif ref.window_agg:
                        effect = Effect.AGGREGATION
                    elif ref.orphan:
                        effect = Effect.AMBIGUOUS
                    else:
                        effect = value_effect(ref, expr)
                    self.graph.add(
                        FDD,
                        ref.key,
                        target,
                        effect=effect,
                        transform=transform,
                        function=ref.func,
                        span=ref.span,
                    )
            if is_agg:
                agg_cols.append(col)
        if open_stars:
            qr.extra = _star_extra(self, qr, open_stars)

        # Row-count influences ---------------------------------------------------------------------
        for src in scope.sources:
            if src.query is not None and self.graph.is_fed(src.rows_key):
                self.graph.add(FDD, src.rows_key, (ds.id, ds.rows()), clause_type=ClauseType.SELECT)

        def restrict(refs: list[Ref], clause: ClauseType, to_aggregates: bool) -> None:
            for ref in refs:
                if ref.count_star:
                    continue
                ds.rows()
                self.graph.add(FDR, ref.key, rows_target, clause_type=clause, span=ref.span)
                if to_aggregates:
                    for col in agg_cols:
                        self.graph.add(FDR, ref.key, (ds.id, col), clause_type=clause, span=ref.span)

        for join in joins:
            on = join.args.get("on")
            if on is not None:
                refs = []
                self._collect(on, scope, refs)
                restrict(refs, ClauseType.JOIN, False)
                self._join_pairs(on, scope)
            for ident in join.args.get("using") or []:
                refs = []
                for src in scope.sources:
                    key = src.column(ident.name, self.span_of(ident))
                    if key is not None:
                        refs.append(Ref(key))
                restrict(refs, ClauseType.JOIN, False)
        where = sel.args.get("where")
        if where is not None:
            refs = []
            self._collect(where.this, scope, refs, lateral=aliases, filter_context=True)
            restrict(refs, ClauseType.WHERE, True)
        group = sel.args.get("group")
        grouped = False
        if isinstance(group, exp.Group):
            refs = []
            for g in group.expressions:
                grouped = True
                if isinstance(g, exp.Literal) and not g.is_string and g.name.isdigit():
                    pos = int(g.name) - 1
                    if 0 <= pos < len(sel.expressions):
                        proj_name = qr.columns[pos] if pos < len(qr.columns) else ""
                        refs.extend(aliases.get(proj_name.lower(), []))
                    continue
                self._collect(g, scope, refs, lateral=aliases, filter_context=True)
            if group.args.get("all"):  # GROUP BY ALL: by every select item that is no aggregate
                grouped = True
                for name in qr.columns:
                    if name not in agg_cols:
                        refs.extend(r for r in aliases.get(name.lower(), []) if not r.window)
            restrict([r for r in refs if not r.agg], ClauseType.GROUP_BY, True)
        having = sel.args.get("having")
        if having is not None:
            refs = []
            self._collect(having.this, scope, refs, lateral=aliases, filter_context=True)
            restrict(refs, ClauseType.HAVING, True)
        qualify = sel.args.get("qualify")
        if qualify is not None:
            refs = []
            self._collect(qualify.this, scope, refs, lateral=aliases, filter_context=True)
            restrict(refs, ClauseType.WHERE, False)
        if agg_cols and not grouped:
            for src in scope.sources:
                src.ds.rows()
                for col in agg_cols:
                    self.graph.add(FDR, src.rows_key, (ds.id, col), clause_type=ClauseType.SELECT)
        return qr

    def _star(self, scope: Scope, qr: QueryResult, proj: exp.Expr, open_stars: list[Source]) -> None:
        star = proj.this if isinstance(proj, exp.Column) else proj
        if isinstance(proj, exp.Column):
            qual = tuple(p.lower() for p in _qualifier(proj))
            src = scope.find(qual)
            if src is None and self._struct_column_star(scope, qr, proj):
                return
            if src is None:
                self.warn(
                    f"{proj.sql(dialect=self.dialect)}: no such table in FROM",
                    kind="resolve",
                    span=self.span_of(proj),
                )
                return
            sources = [src]
        else:
            sources = list(scope.sources)
        excluded: set[str] = set()
        replaced: dict[str, exp.Expr] = {}
        if isinstance(star, exp.Star):
            for arg in ("except_", "except", "exclude"):
                for e in star.args.get(arg) or []:
                    excluded.add(e.name.lower())
            for e in star.args.get("replace") or []:  # BigQuery ``* REPLACE (a + 1 AS a)``
                replaced[e.alias_or_name.lower()] = e.unalias() if isinstance(e, exp.Alias) else e
        span = self.span_of(proj)
        for src in sources:
            cols = src.column_list()
            if cols is not None:
                for c in cols:
                    if c.lower() in excluded:
                        continue
                    if c.lower() in replaced:
                        out = qr.add_output(c)
                        expr = replaced[c.lower()]
                        refs: list[Ref] = []
                        self._collect(expr, scope, refs)
                        transform = _sql(expr, self.state)
                        for ref in refs:
                            if not (ref.count_star or ref.rows):
                                self.graph.add(
                                    FDD,
                                    ref.key,
                                    (qr.ds.id, out),
                                    effect=Effect.MODIFIED_COPY,
                                    transform=transform,
                                )
                        continue
                    ckey = src.column(c, None)
                    if ckey is None:
                        continue
                    self.graph.add(FDD, ckey, (qr.ds.id, qr.add_output(c)), effect=Effect.EXACT_COPY)
            if src.is_open():
                open_stars.append(src)
                if cols is None or (src.query is not None and "*" in src.query.columns):
                    star_col = "*" if "*" in qr.columns else qr.add_output("*")
                    skey = (src.ds.id, src.ds.column("*", span))
                    self.graph.add(FDD, skey, (qr.ds.id, star_col), effect=Effect.EXACT_COPY, span=span)

    def _join_pairs(self, on: exp.Expr, scope: Scope) -> None:
        for eq in on.find_all(exp.EQ):
            left, right = eq.this, eq.expression
            if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                lk = self._resolve_one(left, scope)
                rk = self._resolve_one(right, scope)
                if lk is not None and rk is not None and lk[0] != rk[0]:
                    self.graph.add(
                        RelationType.JOIN, lk, rk, clause_type=ClauseType.JOIN, span=self.span_of(left)
                    )

    def _resolve_one(self, col: exp.Column, scope: Scope) -> EndKey | None:
        refs: list[Ref] = []
        self._collect(col, scope, refs)
        return refs[0].key if len(refs) == 1 and not refs[0].orphan else None

    # -- FROM -----------------------------------------------------------------------------------------

    def _add_source(self, scope: Scope, item: exp.Expr) -> None:
        self._add_plain_source(scope, item)
        for pivot in item.args.get("pivots") or []:
            if isinstance(pivot, exp.Pivot) and scope.sources:
                scope.sources[-1] = self._pivot(scope.sources[-1], pivot)

    def _pivot(self, base: Source, pivot: exp.Pivot) -> Source:
        """``PIVOT (agg FOR col IN (...))``: each pivoted column is the aggregate's data, restricted by the
        FOR column and grouped by the other columns (passed through); ``UNPIVOT (v FOR name IN (c1, c2))``:
        v is the data of c1, c2..., name holds their names (no data), the other columns pass through."""
        ds = self.numbered_resultset("PIVOT", "pivot_table", pivot.alias or base.alias or None)
        qr = QueryResult(ds)
        own = Scope(None, {})
        own.sources.append(base)
        field = (pivot.args.get("fields") or [None])[0]
        for_col = field.this if isinstance(field, exp.In) else None
        items = list(field.expressions) if isinstance(field, exp.In) else []
        used: set[str] = set()

        def refs_of(node: exp.Expr | None, agg: bool = False) -> list[Ref]:
            out: list[Ref] = []
            if node is not None:
                self._collect(node, own, out, agg=agg)
            for col in node.find_all(exp.Column) if node is not None else []:
                used.add(col.name.lower())
            return out

        def columns_of(node: exp.Expr) -> list[exp.Expr]:
            node = node.this if isinstance(node, (exp.PivotAlias, exp.Alias)) else node
            return list(node.expressions) if isinstance(node, exp.Tuple) else [node]

        if pivot.args.get("unpivot"):
            values = [
                c.name or f"value{i + 1}"
                for i, c in enumerate(c for e in pivot.expressions for c in columns_of(e))
            ]
            per_item = [columns_of(i) for i in items]
            name_col = None
            if isinstance(for_col, (exp.Column, exp.Identifier)) and for_col.name:
                name_col = qr.add_output(for_col.name)
            data: list[tuple[str, list[Ref]]] = []
            for n, value in enumerate(values):
                refs = [r for cols in per_item if n < len(cols) for r in refs_of(cols[n])]
                data.append((qr.add_output(value), refs))
            used.update(v.lower() for v in values)
            if name_col is not None:
                used.add(name_col.lower())
            group: list[Ref] = []
        else:
            per_agg = [(e.alias.lower(), refs_of(e, agg=True)) for e in pivot.expressions]
            every = [r for _, refs in per_agg for r in refs]

            def measures(name: str) -> list[Ref]:
                """Several aggregates: a column named ``<value>_<alias>`` (or the reverse) is its alias's."""
                low = name.lower()
                hits = [r for a, r in per_agg if a and (low.endswith(f"_{a}") or low.startswith(f"{a}_"))]
                return hits[0] if len(per_agg) > 1 and len(hits) == 1 else every

            names = [c.name for c in pivot.args.get("columns") or []]
            names = names or [i.alias_or_name for i in items]
            data = [(qr.add_output(n), measures(n)) for n in names if n]
            group = refs_of(for_col)
        for col, refs in data:
            for ref in refs:
                effect = Effect.AGGREGATION if ref.agg else Effect.EXACT_COPY
                self.graph.add(FDD, ref.key, (ds.id, col), effect=effect)
            for ref in group:
                self.graph.add(FDR, ref.key, (ds.id, col), clause_type=ClauseType.GROUP_BY)

        def passed(name: str, span: Span | None) -> str | None:
            """A column neither pivoted nor aggregated: passed through, and (PIVOT) a grouping key."""
            if name.lower() in used or base.has(name) is False:
                return None
            key = base.column(name, span, force=True)
            if key is None:
                return None
            col = ds.column(name)
            self.graph.add(FDD, key, (ds.id, col), effect=Effect.EXACT_COPY)
            if not pivot.args.get("unpivot"):
                for out, _ in data:
                    self.graph.add(FDR, key, (ds.id, out), clause_type=ClauseType.GROUP_BY)
            return col

        through = [passed(n, None) or n for n in base.column_list() or [] if n.lower() not in used]
        qr.columns = through + qr.columns  # the passed-through columns come first
        qr._index = {c.lower(): c for c in qr.columns}
        if base.column_list() is None:
            qr.extra = passed
        alias = (pivot.alias or base.alias).lower()
        return Source(alias=alias, ds=ds, names=(*base.names, alias), query=qr)

    def _add_plain_source(self, scope: Scope, item: exp.Expr) -> None:
        self.check()
        alias_expr = item.args.get("alias")
        alias = item.alias if isinstance(alias_expr, exp.TableAlias) else ""
        alias_cols = [c.name for c in alias_expr.columns] if isinstance(alias_expr, exp.TableAlias) else []
        if isinstance(item, exp.Table):
            if isinstance(item.this, exp.Func):
                self._function_source(scope, item.this, alias, alias_cols, table=item)
                return
            name = _table_name(item)
            low = name.lower()
            db, catalog = _part_text(item, "db"), _part_text(item, "catalog")
            if not db and low in scope.ctes:
                cte = scope.ctes[low]
                ds = cte.ds
                src = Source(alias=(alias or name).lower(), ds=ds, names=(low,), query=cte)
                if alias_cols:
                    _rename(src, alias_cols, cte.columns)
                scope.sources.append(src)
                return
            ds = self.table(item)
            maps = self.state.schema.column_maps(catalog or None, db or self.state.default_db or None, name)
            known = types = None
            closed = False
            if maps is not None:
                known, types = maps[1], maps[2]
                closed = self.state.schema.closed(catalog or None, db or self.state.default_db or None, name)
            names = {low}
            if db:
                names.add(f"{db.lower()}.{low}")
                if catalog:
                    names.add(f"{catalog.lower()}.{db.lower()}.{low}")
            scope.sources.append(
                Source(
                    alias=(alias or name).lower(),
                    ds=ds,
                    names=tuple(names),
                    known=known,
                    types=types,
                    closed=closed,
                )
            )
            return
        while (
            isinstance(item, exp.Subquery)
            and isinstance(item.this, exp.Subquery)
            and not alias
            and not item.args.get("joins")
        ):
            item = item.this  # ``FROM ((x))``
            alias_expr = item.args.get("alias")
            alias = item.alias if isinstance(alias_expr, exp.TableAlias) else ""
        if (
            isinstance(item, exp.Subquery)
            and not alias
            and (isinstance(item.this, exp.Table) or item.args.get("joins"))
        ):
            # ``FROM (a JOIN b ON ...)`` or ``FROM ((a JOIN b ON ...) JOIN c ON ...)``: a parenthesised
            # join, not a derived table; sqlglot hangs the outer joins on the inner parenthesis.
            inner = item.this
            self._add_source(scope, inner)
            joins = list(inner.args.get("joins") or []) if isinstance(inner, exp.Table) else []
            for join in joins + list(item.args.get("joins") or []):
                self._add_source(scope, join.this)
                for ident in join.args.get("using") or []:
                    scope.using.add(ident.name.lower())
                scope.nested_joins.append(join)
            return
        if isinstance(item, (exp.Subquery, exp.Select, exp.SetOperation, exp.Values)):
            qr = self.query_lineage(item, scope.parent, scope.ctes, alias=alias or None)
            src = Source(alias=(alias or qr.ds.name).lower(), ds=qr.ds, names=(), query=qr)
            if alias_cols and not isinstance(item, exp.Values):
                _rename(src, alias_cols, qr.columns)
            scope.sources.append(src)
            return
        if isinstance(item, exp.Lateral):
            inner = item.this
            if isinstance(inner, (exp.Subquery, exp.Select)):
                qr = self.query_lineage(inner, scope, scope.ctes, alias=alias or None)
                scope.sources.append(
                    Source(alias=(alias or qr.ds.name).lower(), ds=qr.ds, names=(), query=qr)
                )
                return
            self._function_source(scope, inner, alias, alias_cols)
            return
        if isinstance(item, (exp.Unnest, exp.Func)):
            self._function_source(scope, item, alias, alias_cols)
            return
        if isinstance(item, exp.TableFromRows) and isinstance(item.this, exp.Func):
            self._function_source(scope, item.this, alias, alias_cols)  # Snowflake TABLE(generator(...))
            return
        msg = f"unsupported FROM item {item.key.upper()}"
        raise UnsupportedSQL(msg)

    def _function_source(
        self,
        scope: Scope,
        func: exp.Expr,
        alias: str,
        alias_cols: list[str],
        table: exp.Table | None = None,
    ) -> None:
        """A table-valued function: a table of subType function when named (a UDF), else FUNCTION-n."""
        if table is not None and isinstance(func, exp.Anonymous):
            fname = func.name
            ds = self.graph.dataset(
                DatasetBuilder(
                    id=dataset_id(DatasetKind.TABLE, fname, table.db or None, table.catalog or None),
                    kind=DatasetKind.TABLE,
                    name=fname,
                    db=table.db or None,
                    catalog=table.catalog or None,
                    sub_type="function",
                    alias=alias or None,
                )
            )
            names = {fname.lower()}
            if table.db:
                names.add(f"{table.db.lower()}.{fname.lower()}")
            scope.sources.append(Source(alias=(alias or fname).lower(), ds=ds, names=tuple(names)))
            return
        ds = self.numbered_resultset("FUNCTION", "function", alias or None)
        qr = QueryResult(ds)
        arg_refs: list[Ref] = []
        self._collect(func, scope, arg_refs)
        transform = _sql(func, self.state)
        fname = func.sql_name() if isinstance(func, exp.Func) else func.key.upper()
        element_fields = self._element_fields(scope, func, arg_refs, alias_cols)

        def feed(col: str) -> None:
            for ref in arg_refs:
                if not ref.count_star:
                    self.graph.add(
                        FDD,
                        with_field(ref.key, element_fields.get(col.lower())) if element_fields else ref.key,
                        (ds.id, col),
                        effect=Effect.MODIFIED_COPY,
                        transform=transform,
                        function=fname,
                    )

        # without a column list the alias also names the single column (``FROM generate_series(...) AS d``)
        for c in alias_cols or ([alias] if alias else []):
            feed(qr.add_output(c))
        if not alias_cols:
            unnamed_unnest = isinstance(func, exp.Unnest) and not alias

            def extra(name: str, span: Span | None) -> str | None:
                col = ds.column(name)
                if unnamed_unnest:  # BigQuery: an UNNEST without alias shows its elements' fields
                    element_fields[col.lower()] = col
                feed(col)
                return col

            qr.extra = extra
        scope.sources.append(Source(alias=(alias or ds.name).lower(), ds=ds, names=(), query=qr))

    def _element_fields(
        self, scope: Scope, func: exp.Expr, arg_refs: list[Ref], alias_cols: list[str]
    ) -> dict[str, str]:
        """Columns of a table function that are fields of its array's elements (lower name -> field):
        ``inline(items) AS (sku, qty)``, Trino's ``UNNEST(items) AS x (sku, qty)`` over an array of rows.
        The fields are named by the schema's type of the array where it is known (by position), else by
        the column list (docs/nested-data.md). Empty for one column (the element itself) or several
        arrays."""
        if isinstance(func, exp.Lateral):
            func = func.this
        values = [r for r in arg_refs if not (r.rows or r.count_star)]
        keys = tuple_keys(func)
        if keys is not None:
            return {c.lower(): k for c, k in zip(alias_cols, keys, strict=False)}
        if isinstance(func, exp.Inline):
            cols = alias_cols
        elif isinstance(func, exp.Unnest) and len(func.expressions) == 1 and len(alias_cols) > 1:
            cols = alias_cols[:-1] if func.args.get("offset") else alias_cols
        else:
            return {}
        if len(values) != 1 or not cols:
            return {}
        key = values[0].key
        type_text = self._column_type(scope, key)
        if type_text is not None and type_text.strip().upper().startswith("MAP"):
            return {}
        known = struct_fields(type_text, key[2].split(".") if len(key) == 3 else [], self._dialect_name)
        names = known if known is not None and len(known) == len(cols) else cols
        return {c.lower(): n for c, n in zip(cols, names, strict=True)}

    def _column_type(self, scope: Scope, key: EndKey) -> str | None:
        """The schema's type of the column ``key`` is in, when a source of the scope (or an enclosing one)
        is that column's table and its schema is known."""
        s: Scope | None = scope
        while s is not None:
            for src in s.sources:
                if src.ds.id == key[0] and src.types is not None:
                    return src.types.get(key[1].lower())
            s = s.parent
        return None

    @property
    def _dialect_name(self) -> str | None:
        name = type(self.dialect).__name__.lower()
        return None if name == "dialect" else name

    def _struct_column_star(self, scope: Scope, qr: QueryResult, proj: exp.Column) -> bool:
        """``SELECT s.*`` where ``s`` is a struct column, not a table: each field of ``s`` becomes an output
        column, fed by that field. The fields come from the schema's type of the column; without one the
        item's fields are not known and it is read as the whole struct into a column named after it
        (docs/nested-data.md). False when ``s`` names no column either."""
        parts = _qualifier(proj)
        if not parts:
            return False
        # placed without side effects first: a qualifier that names nothing stays a warning, no orphan
        src = scope.find((parts[0].lower(),)) if len(parts) > 1 else None
        found: EndKey | None = None
        if src is not None and src.has(parts[1]) is not False:
            found = src.column(parts[1], None, force=True)
            found = with_field(found, ".".join(parts[2:])) if found is not None else None
        elif src is None:
            hit = self._lookup(parts[0], scope)
            found = with_field(hit, ".".join(parts[1:])) if isinstance(hit, tuple) else None
        if found is None:
            return False
        key = found
        steps = key[2].split(".") if len(key) == 3 else []
        fields = struct_fields(self._column_type(scope, key), steps, self._dialect_name)
        span = self.span_of(proj)
        if fields is None:
            self.warn(
                f"{proj.sql(dialect=self.dialect)}: the fields of the struct are not known (give a schema)",
                kind="resolve",
                span=span,
            )
            out = qr.add_output(steps[-1] if steps else key[1])
            self.graph.add(FDD, key, (qr.ds.id, out), effect=Effect.EXACT_COPY, span=span)
            return True
        for name in fields:
            out = qr.add_output(name)
            self.graph.add(FDD, with_field(key, name), (qr.ds.id, out), effect=Effect.EXACT_COPY, span=span)
        return True

    # -- expressions ----------------------------------------------------------------------------------

    def _collect(
        self,
        node: exp.Expr,
        scope: Scope,
        out: list[Ref],
        *,
        lateral: Mapping[str, list[Ref]] | None = None,
        agg: bool = False,
        window: bool = False,
        func: str | None = None,
        bound: frozenset[str] = frozenset(),
        filter_context: bool = False,
    ) -> None:
        """Column occurrences of ``node`` (not descending into subqueries, which get their own RS).

        An explicit stack rather than recursion: generated SQL nests thousands deep (``a AND b AND ...``),
        which sqlglot parses iteratively and a recursive walk could not follow.
        """
        stack: list[_WalkItem] = [(node, agg, window, func, bound, filter_context)]
        resolve_variable = self.state.resolve_variable  # set per procedural block, not during a walk
        while stack:
            node, agg, window, func, bound, filter_context = stack.pop()
            if resolve_variable is not None and isinstance(node, (exp.Column, exp.Parameter)):
                var_key = resolve_variable(node)
                if var_key is not None:
                    out.append(Ref(var_key, self.span_of(node), agg, window, func=func))
                    continue
            kind = _NODE_KINDS.get(type(node))
            if kind is None:
                kind = _node_kind(type(node))
            if kind is _COLUMN:
                col = cast(exp.Column, node)  # kinds are by class: the isinstance checks ran once
                if isinstance(col.args.get("this"), exp.Star):
                    qual = tuple(p.lower() for p in _qualifier(col))
                    src = scope.find(qual) if qual else None
                    if src is not None:
                        src.ds.rows()
                        out.append(Ref(src.rows_key, rows=True, agg=agg, func=func))
                    continue
                if bound and not col.table and col.name.lower() in bound:
                    continue
                self._resolve_into(col, scope, out, lateral, agg, window, func)
                continue
            if kind is _PATH:
                chain = field_path(node)
                if chain is not None and isinstance(chain[0], exp.Column):
                    base, steps, others = chain[0], chain[1], chain[2]
                    if not (bound and not base.table and base.name.lower() in bound):
                        # the column, then the field read of it (docs/nested-data.md)
                        start = len(out)
                        self._collect(base, scope, out, lateral=lateral, agg=agg, window=window, func=func)
                        _add_field(out, start, ".".join(steps))
                    for other in others:
                        stack.append((other, agg, window, func, bound, filter_context))
                    continue
                kind = _OTHER
            elif (
                kind is _FUNC and isinstance(node, _LAMBDA_FUNCS) and isinstance(node.expression, exp.Lambda)
            ):
                self._lambda_call(node, scope, out, lateral, agg, window, func, bound)
                continue
            if kind is _QUERY:
                qr = self.query_lineage(node, scope, scope.ctes)
                for c in qr.columns:
                    out.append(Ref((qr.ds.id, c), agg=agg, window=window or filter_context, func=func))
                if self.graph.is_fed(qr.rows_key):
                    out.append(Ref(qr.rows_key, rows=True))
                continue
            if kind is _WINDOW:
                self._window(cast(exp.Window, node), scope, out, lateral, agg, func, bound)
                continue
            if kind is _AGG:
                if isinstance(node, exp.Count) and _counts_rows(node):
                    out.append(Ref(("", ""), count_star=True, window=window, func="COUNT"))
                    continue
                agg, func = (
                    True,
                    cast(exp.Func, node).sql_name(),
                )  # also in window keys: OVER (ORDER BY SUM(v)) ranks groups
            elif kind is _FUNC:
                func = node.name if isinstance(node, exp.Anonymous) else cast(exp.Func, node).sql_name()
            elif kind is _FILTER:
                self._collect(
                    node.this, scope, out, lateral=lateral, agg=agg, window=window, func=func, bound=bound
                )
                cond: list[Ref] = []
                self._collect(node.expression, scope, cond, lateral=lateral, bound=bound)
                for ref in cond:
                    ref.clause = ClauseType.CONDITION
                out.extend(cond)
                continue
            elif kind is _COALESCE:
                self._coalesce(cast(exp.Func, node), scope, out, lateral, agg, window, bound, filter_context)
                continue
            elif kind is _LAMBDA:
                names = frozenset(e.name.lower() for e in node.expressions)
                stack.append((node.this, agg, window, func, bound | names, False))
                continue
            elif kind is _LEAF:
                continue
            # the children, last first (pre-order, left to right): Expr.iter_expressions(reverse=True),
            # inlined (hot path); leaves of a kind already seen are not pushed, as they would be skipped
            for value in reversed(node.args.values()):
                if isinstance(value, list):
                    for child in reversed(value):
                        if isinstance(child, _EXPR) and _NODE_KINDS.get(type(child)) is not _LEAF:
                            stack.append((child, agg, window, func, bound, filter_context))
                elif isinstance(value, _EXPR) and _NODE_KINDS.get(type(value)) is not _LEAF:
                    stack.append((value, agg, window, func, bound, filter_context))

    def _lambda_call(
        self,
        node: exp.Func,
        scope: Scope,
        out: list[Ref],
        lateral: Mapping[str, list[Ref]] | None,
        agg: bool,
        window: bool,
        func: str | None,
        bound: frozenset[str],
    ) -> None:
        """``transform(items, i -> i.sku)`` / ``filter(items, i -> i.qty > 0)``: the lambda's first argument
        is each element of the array, so ``i.sku`` reads ``items.sku``. A transform's output is what its
        body reads (the whole array when the body does not read the element); a filter's output is the
        array's elements, and its body's other columns."""
        fname = node.sql_name()
        arr_refs: list[Ref] = []
        self._collect(
            node.this, scope, arr_refs, lateral=lateral, agg=agg, window=window, func=fname, bound=bound
        )
        lam = cast(exp.Lambda, node.expression)
        names = [e.name.lower() for e in lam.expressions]
        inner = bound | frozenset(names)
        var_refs = [r for r in arr_refs if not (r.rows or r.count_star)]
        element: list[Ref] = []
        others: list[Ref] = []
        stack: list[exp.Expr] = [lam.this]
        while stack:
            n = stack.pop()
            hit = _lambda_step(n, names[0]) if names else None
            if hit is not None:
                steps, rest = hit
                path = ".".join(steps)
                element.extend(
                    Ref(with_field(r.key, path), r.span, agg, window, func=fname, orphan=r.orphan)
                    for r in var_refs
                )
                for o in rest:
                    self._collect(
                        o, scope, others, lateral=lateral, agg=agg, window=window, func=fname, bound=inner
                    )
                continue
            if isinstance(n, exp.Column) or not any(
                isinstance(x, exp.Identifier) and x.name.lower() == names[0] for x in n.walk()
            ):
                self._collect(
                    n, scope, others, lateral=lateral, agg=agg, window=window, func=fname, bound=inner
                )
                continue
            stack.extend(reversed(list(n.iter_expressions())))
        if isinstance(node, exp.Transform) and element:
            out.extend(element)
        else:
            out.extend(arr_refs)
        out.extend(others)

    def _coalesce(
        self,
        node: exp.Func,
        scope: Scope,
        out: list[Ref],
        lateral: Mapping[str, list[Ref]] | None,
        agg: bool,
        window: bool,
        bound: frozenset[str],
        filter_context: bool,
    ) -> None:
        """``COALESCE(a, b)`` (NVL, IFNULL) is the conditional ``CASE WHEN a IS NOT NULL THEN a ELSE b END``:
        every argument is a value, and every argument but the last also decides by its nullness which one
        is taken (an fdr, clause condition), as the Spark hook reads it."""
        args = [a for a in (node.this, *node.expressions) if isinstance(a, exp.Expr)]
        for i, arg in enumerate(args):
            values: list[Ref] = []
            self._collect(
                arg,
                scope,
                values,
                lateral=lateral,
                agg=agg,
                window=window,
                func="COALESCE",
                bound=bound,
                filter_context=filter_context,
            )
            bare = isinstance(arg.unnest(), exp.Column)
            for ref in values:
                ref.partial = bare
            out.extend(values)
            if i < len(args) - 1:
                out.extend(
                    Ref(r.key, r.span, func="COALESCE", orphan=r.orphan, clause=ClauseType.CONDITION)
                    for r in values
                    if not (r.window or r.rows or r.count_star or r.agg or r.clause is not None)
                )

    def _window(
        self,
        node: exp.Window,
        scope: Scope,
        out: list[Ref],
        lateral: Mapping[str, list[Ref]] | None,
        agg: bool,
        func: str | None,
        bound: frozenset[str],
    ) -> None:
        """A window function: its arguments, then PARTITION BY / ORDER BY columns (fdr, clause window)."""
        fn = node.this
        if isinstance(fn, exp.AggFunc) and not (isinstance(fn, exp.Count) and _counts_rows(fn)):
            # ``SUM(x) OVER (...)`` aggregates over the window, not over a GROUP BY group: its
            # arguments are values (effect AGGREGATION) and the output is no grouped aggregate
            inner: list[Ref] = []
            for arg in fn.iter_expressions():
                self._collect(arg, scope, inner, lateral=lateral, agg=agg, func=fn.sql_name(), bound=bound)
            navigation = isinstance(fn, _NAVIGATION)  # LAG(x) copies a value of another row
            for ref in inner:
                ref.window_agg = not ref.agg and not navigation
            out.extend(inner)
        else:  # ROW_NUMBER(), COUNT(*) OVER (...): values of the function's own arguments
            own: list[Ref] = []
            self._collect(fn, scope, own, lateral=lateral, agg=False, window=False, func=func, bound=bound)
            for ref in own:
                ref.window = ref.window or ref.count_star  # COUNT(*) OVER: no grouped aggregate
            out.extend(own)
        named = _named_window(node)
        for p in node.args.get("partition_by") or named.args.get("partition_by") or []:
            self._collect(p, scope, out, lateral=lateral, window=True, bound=bound)
        order = node.args.get("order") or named.args.get("order")
        if order is not None:
            self._collect(order, scope, out, lateral=lateral, window=True, bound=bound)

    def _resolve_into(
        self,
        col: exp.Column,
        scope: Scope,
        out: list[Ref],
        lateral: Mapping[str, list[Ref]] | None,
        agg: bool,
        window: bool,
        func: str | None,
    ) -> None:
        self.check()
        name = _part_text(col, "this")
        span = self.span_of(col)
        parts = _qualifier(col)
        qual = tuple(map(str.lower, parts))  # a C loop: once per column met
        if qual:
            for cut in range(len(qual), 0, -1):
                s: Scope | None = scope
                while s is not None:
                    src = s.find(qual[:cut])
                    if src is not None:
                        # a shorter cut is a struct field access: ``t.col.field`` reads t.col
                        col_name = name if cut == len(qual) else parts[cut]
                        field = ".".join([*parts[cut + 1 :], name]) if cut < len(qual) else None
                        key = src.column(col_name, span, force=True)
                        if key is None:
                            key = self.orphan(col_name, span, _no_such_column(".".join(qual[:cut]), src))
                            out.append(Ref(with_field(key, field), span, agg, window, func=func, orphan=True))
                        else:
                            out.append(Ref(with_field(key, field), span, agg, window, func=func))
                        return
                    s = s.parent
            # ``a.b`` where ``a`` is a column (a struct field access), not a table
            head = parts[0]
            if self._lookup(head, scope) is not None or len(scope.sources) == 1:
                inner = exp.column(head)
                table_ident = col.args.get("catalog") or col.args.get("db") or col.args.get("table")
                if isinstance(table_ident, exp.Identifier):
                    inner.this.meta.update(table_ident.meta)
                start = len(out)
                self._resolve_into(inner, scope, out, lateral, agg, window, func)
                _add_field(out, start, ".".join([*parts[1:], name]))
                return
            key = self.orphan(name, span, f"no table {'.'.join(qual)!s} in scope")
            out.append(Ref(key, span, agg, window, func=func, orphan=True))
            return
        low = name.lower()
        if (
            lateral is not None
            and low in lateral
            and type(lateral) is not _LastResortAliases
            and not _column_first(name, scope, lateral)
        ):
            # a select-list alias (GROUP BY x, lateral ``x * 2``) unless a known column has that name
            out.extend(_from_alias(lateral[low], agg, window, func))
            return
        s = scope
        while s is not None:
            hit = self._lookup(name, s)
            if isinstance(hit, tuple):
                out.append(Ref(hit, span, agg, window, func=func))
                return
            if hit is _AMBIGUOUS:
                tables = ", ".join(src.ds.name for src in s.sources)
                key = self.orphan(name, span, f"several tables in FROM ({tables}) and no schema tells which")
                out.append(Ref(key, span, agg, window, func=func, orphan=True))
                return
            if (
                s is scope
                and lateral is not None
                and low in lateral
                and type(lateral) is not _LastResortAliases
            ):
                out.extend(_from_alias(lateral[low], agg, window, func))
                return
            s = s.parent
        if lateral is not None and low in lateral:
            # a dialect without lateral aliases, but the schema knows every source and none has the name
            # (nor has an enclosing query): the earlier item's alias is the one reading left (BigQuery's
            # reusable aliases, an option there; elsewhere the engine would refuse the query)
            out.extend(_from_alias(lateral[low], agg, window, func))
            return
        s = scope  # no source has such a column: a table alias used as a value (the whole row)?
        while s is not None:
            row = _row_source(low, s)
            if row is not None:
                out.extend(self._row_refs(row, span, agg, window, func))
                return
            s = s.parent
        if len(scope.sources) == 1:
            key2 = scope.sources[0].column(name, span, force=True)
            if key2 is not None:
                out.append(Ref(key2, span, agg, window, func=func))
                return
        reason = "no table in scope" if not scope.sources else "not a column of any table in scope"
        if len(scope.sources) == 1 and scope.sources[0].closed:
            reason = _no_such_column(scope.sources[0].alias, scope.sources[0])
        key = self.orphan(name, span, reason)
        out.append(Ref(key, span, agg, window, func=func, orphan=True))

    def _row_refs(
        self, src: Source, span: Span | None, agg: bool, window: bool, func: str | None
    ) -> list[Ref]:
        """A table alias used as a value (BigQuery's and PostgreSQL's whole row, ``TO_JSON_STRING(t)``):
        every column of the source, or its ``*`` when its columns are not known - never a column named
        after the alias."""
        cols = src.column_list()
        if cols is None or src.is_open():
            return [Ref((src.ds.id, src.ds.column("*", span)), span, agg, window, func=func)]
        return [
            Ref(key, span, agg, window, func=func) for c in cols if (key := src.column(c, span)) is not None
        ]

    def _struct_star(self, scope: Scope, qr: QueryResult, proj: exp.Dot, open_stars: list[Source]) -> bool:
        """``IF(main.id IS NOT NULL, main, extras).* REPLACE (...)``: a star over an expression whose value is
        a whole row of FROM sources (table aliases used as values). Each output column is that column of
        every such row, plus the expression's other columns (its condition, fdd as CASE conditions are);
        EXCEPT drops columns, REPLACE computes them. False when the expression holds no such row (a struct
        column's fields are not known here: the item is left to the generic path)."""
        inner = proj.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        rows: list[Source] = []
        others: list[exp.Column] = []
        for col in inner.find_all(exp.Column):
            if not col.args.get("table") and not isinstance(col.this, exp.Star):
                row = _row_source(col.name.lower(), scope)
                if row is not None:
                    if row not in rows:
                        rows.append(row)
                    continue
            others.append(col)
        if not rows:
            return False
        star = proj.expression
        excluded = {
            e.name.lower() for arg in ("except_", "except", "exclude") for e in star.args.get(arg) or []
        }
        replaced = {
            e.alias_or_name.lower(): (e.unalias() if isinstance(e, exp.Alias) else e)
            for e in star.args.get("replace") or []
        }
        cond: list[Ref] = []
        for col in others:
            self._collect(col, scope, cond)
        shape = next((cols for r in rows if not r.is_open() and (cols := r.column_list()) is not None), None)
        transform = _sql(inner, self.state)
        for c in shape or [c for c in replaced]:
            if c.lower() in excluded:
                continue
            out = qr.add_output(c)
            if c.lower() in replaced:
                expr = replaced[c.lower()]
                refs: list[Ref] = []
                self._collect(expr, scope, refs)
                text = _sql(expr, self.state)
                for ref in refs:
                    if not (ref.count_star or ref.rows):
                        self.graph.add(
                            FDD, ref.key, (qr.ds.id, out), effect=Effect.MODIFIED_COPY, transform=text
                        )
                continue
            for r in rows:
                key = r.column(c, None, force=True)
                if key is not None:
                    self.graph.add(
                        FDD, key, (qr.ds.id, out), effect=Effect.MODIFIED_COPY, transform=transform
                    )
            for ref in cond:
                if not (ref.count_star or ref.rows):
                    self.graph.add(
                        FDD, ref.key, (qr.ds.id, out), effect=Effect.MODIFIED_COPY, transform=transform
                    )
        if shape is None:  # columns named later through this result resolve through the rows
            open_stars.extend(r for r in rows if r not in open_stars)
        return True

    def _lookup(self, name: str, scope: Scope) -> ColKey | object | None:
        """Unqualified column in one scope: a key, _AMBIGUOUS, or None (not here)."""
        low = name.lower()
        known_hits: list[Source] = []
        unknown: list[Source] = []
        for src in scope.sources:
            known = src.known
            if known is not None and src.rename is None and src.query is None:
                if low in known:  # a table the schema knows: Source.has_lower inline (hot path)
                    known_hits.append(src)
                continue
            h = src.has_lower(low)
            if h is True:
                known_hits.append(src)
            elif h is None:
                unknown.append(src)
        if low in scope.using and (known_hits or unknown):
            return (known_hits or unknown)[0].column(name, None)
        if len(known_hits) == 1:
            return known_hits[0].column(name, None)
        if len(known_hits) > 1:
            return _AMBIGUOUS
        if len(unknown) == 1:
            return unknown[0].column(name, None, force=True)
        if len(unknown) > 1:
            return _AMBIGUOUS
        return None


# ---------------------------------------------------------------------------------------------------------


def _star_extra(
    ctx: StatementContext, qr: QueryResult, open_sources: list[Source]
) -> Callable[[str, Span | None], str | None]:
    """Resolve a name through a ``*`` over sources whose columns are not all known."""

    def extra(name: str, span: Span | None) -> str | None:
        cands = [s for s in open_sources if s.has(name) is not False]
        if len(cands) != 1:
            return None
        key = cands[0].column(name, span, force=True)
        if key is None:
            return None
        col = qr.ds.column(name)
        ctx.graph.add(FDD, key, (qr.ds.id, col), effect=Effect.EXACT_COPY)
        return col

    return extra


def _row_source(low: str, scope: Scope) -> Source | None:
    """The source of this scope a bare name is the alias of, when no source has a column of that name (a
    table alias used as a value: the whole row); None otherwise."""
    for src in scope.sources:
        if src.alias == low:
            return None if any(other.has_lower(low) for other in scope.sources) else src
    return None


def _pass_through(
    ctx: StatementContext, body: QueryResult, outer: QueryResult
) -> Callable[[str, Span | None], str | None]:
    def extra(name: str, span: Span | None) -> str | None:
        key = body.lookup(name, span)
        if key is None:
            return None
        col = outer.ds.column(name)
        ctx.graph.add(FDD, key, (outer.ds.id, col), effect=Effect.EXACT_COPY)
        return col

    return extra


def _from_alias(refs: list[Ref], agg: bool, window: bool, func: str | None) -> list[Ref]:
    """The refs of a select-list alias, as seen from where the alias is used."""
    return [
        Ref(r.key, r.span, agg or r.agg, window or r.window, r.rows, func or r.func, r.orphan, r.count_star)
        for r in refs
    ]


def _rename(src: Source, alias_cols: list[str], columns: list[str]) -> None:
    pairs = list(zip(alias_cols, columns, strict=False))
    src.rename = {a.lower(): c for a, c in pairs}
    src.rename_names = tuple(a for a, _ in pairs)


_NAVIGATION: tuple[type[exp.Expr], ...] = tuple(
    t
    for t in (getattr(exp, n, None) for n in ("Lag", "Lead", "FirstValue", "LastValue", "NthValue"))
    if isinstance(t, type)
)


def _same_set_operation(a: exp.SetOperation, b: exp.SetOperation) -> bool:
    return type(a) is type(b) and bool(a.args.get("distinct")) == bool(b.args.get("distinct"))


def _named_window(node: exp.Window) -> exp.Window:
    """``OVER w`` with ``WINDOW w AS (...)``: the named definition (else the node itself)."""
    name = node.args.get("alias")
    select = node.find_ancestor(exp.Select)
    if not isinstance(name, exp.Identifier) or select is None:
        return node
    for spec in select.args.get("windows") or []:
        if isinstance(spec, exp.Window) and spec.this.name.lower() == name.name.lower():
            return spec
    return node


def _refers_to_itself(body: exp.Expr, name: str) -> bool:
    """A CTE body that is a set operation naming the CTE as an unqualified table: a recursive CTE in the
    dialects where ``RECURSIVE`` is not written (T-SQL, Oracle) or optional (Snowflake, SQLite)."""
    if not isinstance(body, exp.SetOperation):
        return False
    low = name.lower()
    return any(not t.db and t.name.lower() == low for t in body.find_all(exp.Table))


def value_effect(ref: Ref, expr: exp.Expr) -> Effect:
    """The effect of a value flowing from ``ref`` into an output computed by ``expr`` (not an aggregate):
    a bare column is copied, a bare argument of the output's own COALESCE partly copied, else modified."""
    if isinstance(expr, exp.Column):
        return Effect.EXACT_COPY
    if ref.partial and isinstance(expr.unnest(), exp.Coalesce):
        return Effect.PARTIAL_COPY
    return Effect.MODIFIED_COPY


def _counts_rows(count: exp.Count) -> bool:
    """COUNT(*) / COUNT() / COUNT(1): counts rows, fed by PseudoRows rather than by a column (a non-null
    literal is never skipped, so ``COUNT(1)`` and ``COUNT('x')`` count every row as ``COUNT(*)`` does)."""
    return count.this is None or isinstance(count.this, (exp.Star, exp.Literal))


_WalkItem = tuple[exp.Expr, bool, bool, str | None, frozenset[str], bool]
"""An expression on _collect's stack and its context: agg, window, func, bound names, filter context."""

_LAMBDA_FUNCS = (exp.Transform, exp.ArrayFilter)
"""Functions over an array whose lambda's first argument is each element (docs/nested-data.md)."""

_COLUMN, _QUERY, _WINDOW, _AGG, _FUNC, _FILTER, _LAMBDA, _LEAF, _OTHER, _COALESCE, _PATH = (
    "column",
    "query",
    "window",
    "agg",
    "func",
    "filter",
    "lambda",
    "leaf",
    "other",
    "coalesce",
    "path",
)
_NODE_KINDS: dict[type, str] = {}
"""What :meth:`StatementContext._collect` does with a node, by its class: one dict lookup per node in
place of a chain of isinstance checks (the chain runs once per class, in :func:`_node_kind`)."""


def _node_kind(cls: type) -> str:
    if issubclass(cls, exp.Column):
        kind = _COLUMN
    elif issubclass(cls, PATH_NODES):
        kind = _PATH
    elif issubclass(cls, (exp.Subquery, exp.Select, exp.SetOperation)):
        kind = _QUERY
    elif issubclass(cls, exp.Window):
        kind = _WINDOW
    elif issubclass(cls, exp.Coalesce):
        kind = _COALESCE
    elif issubclass(cls, exp.AggFunc):
        kind = _AGG
    elif issubclass(cls, exp.Func):
        kind = _FUNC
    elif issubclass(cls, exp.Filter):
        kind = _FILTER
    elif issubclass(cls, exp.Lambda):
        kind = _LAMBDA
    elif issubclass(cls, (exp.Literal, exp.DataType, exp.Var, exp.Identifier)):
        kind = _LEAF
    else:
        kind = _OTHER
    _NODE_KINDS[cls] = kind
    return kind


def _lambda_step(node: exp.Expr, var: str) -> tuple[list[str], list[exp.Expr]] | None:
    """The field steps below lambda variable ``var`` that ``node`` reads (``i``, ``i.sku``, ``i['k']``), and
    the other expressions it reads; None when ``node`` is no path from ``var``."""
    if isinstance(node, exp.Identifier):
        return ([], []) if node.name.lower() == var else None
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        parts = [*_qualifier(node), node.name]
        return (parts[1:], []) if parts[0].lower() == var else None
    if isinstance(node, PATH_NODES):
        chain = field_path(node)
        if chain is None:
            return None
        base, steps, others = chain
        below = _lambda_step(base, var)
        return None if below is None else ([*below[0], *steps], others)
    return None


def _add_field(refs: list[Ref], start: int, path: str) -> None:
    """Refs ``start`` on read a field below their column (``path``, dotted): a row count stays whole."""
    if not path:
        return
    for ref in refs[start:]:
        if not (ref.rows or ref.count_star):
            ref.key = with_field(ref.key, path)


def _qualifier(col: exp.Column) -> list[str]:
    args = col.args
    out = []
    for key in _QUALIFIER_ARGS:
        part = args.get(key)
        if part is None:
            continue
        # an Identifier's name is its "this" (a str): read it without the property chain (hot path)
        name = part.args.get("this") if type(part) is _IDENTIFIER else None
        if type(name) is not str:
            name = part.name if isinstance(part, exp.Expr) else ""
        if name:
            out.append(name)
    return out


def _part_text(node: exp.Expr, key: str) -> str:
    """``node.text(key)`` (a column's name, a table's db...), read off the Identifier there directly (hot
    path: sqlglot's property goes through two Python calls)."""
    part = node.args.get(key)
    if type(part) is _IDENTIFIER:
        text = part.args.get("this")
        if type(text) is str:
            return text
    elif part is None:  # (a table without db)
        return ""
    return node.text(key)


def _table_name(table: exp.Table) -> str:
    """``table.name``, read as :func:`_part_text` reads a part."""
    part = table.args.get("this")
    if type(part) is _IDENTIFIER:
        text = part.args.get("this")
        if type(text) is str:
            return text
    return table.name


_QUALIFIER_ARGS = ("catalog", "db", "table")
_IDENTIFIER = exp.Identifier
_EXPR = exp.Expr


LATERAL_ALIAS_DIALECTS = frozenset(
    {"snowflake", "databricks", "spark", "redshift", "teradata", "duckdb", "clickhouse"}
)
"""Dialects whose select items may name an earlier item's alias (ANSI, PostgreSQL, Hive... may not).
BigQuery's "reusable column aliases" are a project option, off by default: off, a later item's name that
is no alias' can only be a column of the sources (the one reading under which the query runs), so BigQuery
is left out."""

IMPLICIT_RECURSION_DIALECTS = frozenset({"tsql", "fabric", "oracle", "snowflake", "sqlite"})
"""Dialects where a CTE that names itself is recursive without ``WITH RECURSIVE`` (elsewhere the name is a
table: PostgreSQL's ``WITH u AS (SELECT ... FROM u)`` reads the table u)."""


class _SelectListAliases(Mapping[str, list["Ref"]]):
    """The aliases an item of the select list may name: only where no source column has that name."""

    def __init__(self, aliases: dict[str, list[Ref]]) -> None:
        self._aliases = aliases

    def __getitem__(self, key: str) -> list[Ref]:
        return self._aliases[key]

    def __contains__(self, key: object) -> bool:
        # asked once per unqualified column: the dict's own test, not Mapping's try/except KeyError
        return key in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._aliases)

    def __len__(self) -> int:
        return len(self._aliases)


class _LastResortAliases(_SelectListAliases):
    """The earlier aliases of a select list in a dialect without lateral aliases: read only where no source
    can have the name (the schema knows them all and none has it), never before a column."""


def _column_first(name: str, scope: Scope, lateral: Mapping[str, list[Ref]]) -> bool:
    """Whether a name an alias also has resolves to a source column instead.

    In GROUP BY and the like, only a column the schema knows wins. In the select list (a lateral alias) a
    table of unknown schema wins too once the statement has shown it has that column (``x || a AS a, a``).
    """
    hits = [src.has(name) for src in scope.sources]
    if any(hits):
        return True
    if not isinstance(lateral, _SelectListAliases):
        return False
    return any(
        h is None and src.query is None and src.ds.has_column(name)
        for h, src in zip(hits, scope.sources, strict=True)
    )


def _sql(expr: exp.Expr, state: ScriptState) -> str:
    """SQL text of an expression. sqlglot deep-copies before generating (its dialect transforms may
    rewrite queries, T-SQL's ENSURE_BOOLS rewrites conditions); a plain expression without a query inside
    is generated in place for other dialects, which leaves it as it was and spares the copy, by the
    script's one generator (making one per text cost more than generating most texts). A generator
    numbers the table aliases it makes up, so an expression with a table alias gets a fresh one."""
    dialect = state.dialect
    if _ensures_bools(dialect) or _holds_query_or_alias(expr):
        return expr.sql(dialect=dialect, comments=False, copy=True)
    generator = state.generator
    if generator is None:
        generator = state.generator = dialect.generator(comments=False)
    try:
        return generator.generate(expr, copy=False)
    except Exception:
        state.generator = None  # it may be left half-way through a text (a flag not reset): not reused
        raise


def _holds_query_or_alias(expr: exp.Expr) -> bool:
    """``expr.find(exp.Query, exp.TableAlias) is not None``, walked over the args directly (sqlglot's walk
    goes through a generator per node)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, _QUERY_OR_ALIAS):
            return True
        for value in node.args.values():
            if isinstance(value, list):
                stack.extend(child for child in value if isinstance(child, _EXPR))
            elif isinstance(value, _EXPR):
                stack.append(value)
    return False


_QUERY_OR_ALIAS = (exp.Query, exp.TableAlias)
_ENSURE_BOOLS: dict[type[Dialect], bool] = {}


def _ensures_bools(dialect: Dialect) -> bool:
    # read on an instance: in sqlglot's compiled build (sqlglotc) the class attribute is a descriptor
    cls = type(dialect)
    if cls not in _ENSURE_BOOLS:
        _ENSURE_BOOLS[cls] = bool(getattr(dialect.generator(), "ENSURE_BOOLS", True))
    return _ENSURE_BOOLS[cls]


_POSTGRES, _SPARK = "postgres", "spark"
_ENGINE_NAMING: dict[type[Dialect], str | None] = {}


def _naming_engine(dialect: Dialect) -> str | None:
    """Whose rules name this dialect's unaliased select items, where they are known for sure (else None:
    the item's SQL text names it). PostgreSQL (and Redshift, built on it) and Spark (Databricks)."""
    cls = type(dialect)
    if cls not in _ENGINE_NAMING:
        from sqlglot.dialects.postgres import Postgres
        from sqlglot.dialects.spark2 import Spark2

        _ENGINE_NAMING[cls] = (
            _POSTGRES if isinstance(dialect, Postgres) else _SPARK if isinstance(dialect, Spark2) else None
        )
    return _ENGINE_NAMING[cls]


_SPARK_OPERATORS = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
)
_POSTGRES_UNNAMED = (exp.Binary, exp.Literal, exp.Not, exp.Neg)


def _engine_name(expr: exp.Expr, engine: str, state: ScriptState) -> str:
    """The name the engine gives an unaliased select item, where it is sure; "" to name it by its text.

    Both name a cast of a column by the column (``col1::timestamp`` is ``col1``: PostgreSQL's
    FigureColname, Spark's ResolveAliases). PostgreSQL names an aggregate by its function (``sum``,
    ``count``) and an operator expression or a constant ``?column?``. Spark names an aggregate of columns by
    its call without qualifiers (``sum(x)``, ``max(y)`` for ``max(t.y)``, ``count(1)`` for ``count(*)``)
    and an operator over columns and constants by its text in parentheses (``(a + b)``).
    """
    if isinstance(expr, exp.Cast):
        inner = expr.this
        return inner.name if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star) else ""
    if engine == _POSTGRES:
        if isinstance(expr, exp.AggFunc):
            head = _sql(expr, state).split("(", 1)[0]
            return head.lower() if head.isidentifier() else ""
        return "?column?" if isinstance(expr, _POSTGRES_UNNAMED) else ""
    if isinstance(expr, exp.AggFunc):
        head = _sql(expr, state).split("(", 1)[0]
        if not head.isidentifier():
            return ""
        if isinstance(expr, exp.Count) and isinstance(expr.this, exp.Star):
            return f"{head.lower()}(1)"
        args = list(expr.iter_expressions())
        distinct = len(args) == 1 and isinstance(args[0], exp.Distinct)
        if distinct:
            args = list(args[0].expressions)
        if not args or not all(_plain_operand(a) for a in args):
            return ""
        inner = ", ".join(_unqualified(a, state) for a in args)
        return f"{head.lower()}({'DISTINCT ' if distinct else ''}{inner})"
    if isinstance(expr, _SPARK_OPERATORS) and _plain_operand(expr.this) and _plain_operand(expr.expression):
        return f"({_unqualified(expr, state)})"
    return ""


def _plain_operand(node: exp.Expr | None) -> bool:
    """A column (not a star) or a number: operands whose text Spark's generated name shows as we write it."""
    if isinstance(node, exp.Column):
        return not isinstance(node.this, exp.Star)
    return isinstance(node, exp.Literal) and not node.is_string


def _unqualified(expr: exp.Expr, state: ScriptState) -> str:
    """SQL text of an expression with its columns' qualifiers left out (Spark's names leave them out)."""
    if isinstance(expr, exp.Column):
        return expr.name
    bare = expr.copy()
    for col in bare.find_all(exp.Column):
        for part in ("table", "db", "catalog"):
            col.set(part, None)
    return _sql(bare, state)


def _text_name(text: str) -> str:
    """The output name of an expression without alias: its SQL text, cut to 128 characters."""
    return text if len(text) <= 128 else text[:125] + "..."


def _statement_key(state: ScriptState, full_hash: str) -> str:
    short = full_hash[:16]
    n = state.hashes_seen.get(short, 0) + 1
    state.hashes_seen[short] = n
    return short if n == 1 else f"{short}#{n}"
