"""Stage 5: the run's report (counts, problems with file:line), printed and written as summary.json."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from atlas_bridge.bridge.deliver import DeliveryStats
from atlas_bridge.bridge.job import ExtractStats
from atlas_bridge.bridge.types import InputFile
from atlas_bridge.model import Lineage, Problem, Severity


@dataclasses.dataclass
class ScanSummary:
    """The closing report of a scan (``summary.json``)."""

    target: str
    files: list[InputFile]
    notes: list[str]
    extract: ExtractStats
    lineage_counts: dict[str, int]
    delivery: DeliveryStats
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.extract.problems if p.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.extract.problems if p.severity is not Severity.ERROR]

    def failed(self, fail_on: str = "error") -> bool:
        """Whether the run counts as failed under ``fail_on`` (``error``, ``warning`` or ``never``)."""
        if fail_on == "never":
            return False
        bad = bool(self.errors or self.delivery.errors)
        return bad or (fail_on == "warning" and bool(self.warnings))

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data; stable for the same input and Atlas state (no timings)."""
        by_kind: dict[str, int] = {}
        for f in self.files:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
        d = self.delivery
        kafka = self.target.startswith("kafka:")
        out: dict[str, Any] = {
            "target": self.target,
            "files": {
                "total": len(self.files),
                "by_kind": dict(sorted(by_kind.items())),
                "skipped": self.notes,
                "per_file": {
                    name: _file_entry(self.extract.files[name]) for name in sorted(self.extract.files)
                },
            },
            "statements": self.extract.statements,
            "lineage": self.lineage_counts,
            "processes": self.lineage_counts.get("processes", 0),
            "batches": {
                "total": d.batches,
                "sent": d.sent,
                "skipped_already_acknowledged": d.skipped,
                "kept_unsent": d.kept,
            },
            "unsent": {"folder": d.kept_dir, "push": push_command(d.kept_dir, kafka=kafka)}
            if d.kept
            else None,
            "resume_reset": d.resume_reset,
            "pruned": {"entities": d.pruned, "note": d.prune_note} if d.pruned or d.prune_note else None,
            "entities": {
                "total": d.entities,
                "created": d.created,
                "updated": d.updated,
                "unchanged": d.unchanged,
                "written_to_files": 0 if kafka else d.written,
            },
            "errors": [_problem_dict(p) for p in self.errors]
            + [{"message": m, "kind": "delivery"} for m in d.errors],
            "warnings": [_problem_dict(p) for p in self.warnings],
        }
        if kafka:
            out["entities"]["published_to_kafka"] = d.written
        sch = self.extract.schema
        if sch is not None:
            out["schema"] = {"learned_tables": sch.tables, "rounds": sch.rounds, "from_atlas": sch.from_atlas}
        return out

    def _merged_note(self) -> str:
        """Identical statements share one process in Atlas: say so when the numbers differ."""
        occurrences = self.lineage_counts.get("statement_processes", 0)
        distinct = self.lineage_counts.get("processes", 0)
        if occurrences > distinct:
            return f" (from {occurrences} statement(s) that write; identical ones share a process)"
        return ""

    def render(self, max_lines: int = 20) -> str:
        """A human-readable closing report."""
        d = self.delivery
        s = self.to_dict()
        n = {k: s["lineage"].get(k, 0) for k in ("processes", "tables", "views", "paths", "column_relations")}
        kinds = ", ".join(f"{n} {k}" for k, n in s["files"]["by_kind"].items()) or "none"
        lines = [
            f"files:      {len(self.files)} ({kinds})",
            f"statements: {s['statements']}",
            f"lineage:    {n['processes']} process(es){self._merged_note()}, {n['tables']} table(s), "
            f"{n['views']} view(s), {n['paths']} path(s), {n['column_relations']} column relation(s)",
            f"batches:    {d.sent} sent, {d.skipped} already acknowledged, of {d.batches} to {self.target}",
        ]
        if d.written:
            where = "published to Kafka" if self.target.startswith("kafka:") else "written to files"
            lines.append(f"entities:   {d.entities} ({d.written} {where})")
        else:
            lines.append(f"entities:   {d.created} created, {d.updated} updated, {d.unchanged} unchanged")
        sch = self.extract.schema
        if sch is not None and (sch.tables or sch.from_atlas):
            atlas = f", {sch.from_atlas} read from Atlas" if sch.from_atlas else ""
            lines.append(f"schema:     {sch.tables} table(s)/view(s) learned from the inputs' DDL{atlas}")
        if d.resume_reset:
            lines.append(f"resume:     {d.resume_reset}")
        if d.pruned or d.prune_note:
            lines.append(
                f"pruned:     {d.pruned} entit(y/ies) of earlier runs"
                + (f"; {d.prune_note}" if d.prune_note else "")
            )
        if d.kept:
            who = "Kafka" if self.target.startswith("kafka:") else "Atlas"
            lines.append(f"unsent:     {d.kept} batch(es) {who} did not acknowledge are kept in {d.kept_dir}")
        errors = s["errors"]
        lines.append(
            f"errors:     {len(errors)}" + (f", warnings: {len(s['warnings'])}" if s["warnings"] else "")
        )
        for e in errors[:max_lines]:
            lines.append(f"  {_problem_text(e)}")
        if len(errors) > max_lines:
            lines.append(f"  ... and {len(errors) - max_lines} more (see summary.json)")
        return "\n".join(lines)


def push_command(folder: str | None, *, kafka: bool = False) -> str:
    """The command that finishes a delivery that could not reach Atlas (or Kafka)."""
    return f"atlas-bridge push {shlex.quote(folder or '.')}" + (" --to kafka" if kafka else "")


def _file_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if v != [] and not (k == "units" and v == 1)}


def _problem_dict(p: Problem) -> dict[str, Any]:
    return p.model_dump(mode="json", exclude_none=True)


def _problem_text(e: Mapping[str, Any]) -> str:
    where = str(e.get("file") or "")
    if e.get("line") is not None:
        where += f":{e['line']}"
        if e.get("column") is not None:
            where += f":{e['column']}"
    stmt = f" statement {e['statement_index']}:" if e.get("statement_index") is not None else ""
    kind = e.get("kind", "error")
    return f"{where}:{stmt} [{kind}] {e['message']}" if where else f"[{kind}] {e['message']}"


def lineage_counts(lineage: Lineage) -> dict[str, int]:
    """Headline numbers of a lineage for the report."""
    kinds: dict[str, int] = {}
    for ds in lineage.datasets:
        kinds[ds.kind.value] = kinds.get(ds.kind.value, 0) + 1
    return {
        "datasets": len(lineage.datasets),
        "tables": kinds.get("table", 0),
        "views": kinds.get("view", 0),
        "paths": kinds.get("path", 0),
        "processes": len(lineage.processes),
        "column_relations": len(lineage.relations),
    }


def write_summary(summary: ScanSummary, output_dir: str | os.PathLike[str]) -> Path:
    """Write ``summary.json`` (sorted keys, stable) into ``output_dir``."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    tmp = path.with_name(f"summary.json.{os.getpid()}.tmp")  # scans may share the folder
    tmp.write_text(
        json.dumps(summary.to_dict(), sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)
    return path
