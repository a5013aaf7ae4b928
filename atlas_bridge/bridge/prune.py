"""Stage 6 (driver, opt-in): delete the lineage our earlier runs made in Atlas that this run no longer makes.

A statement removed from the estate, or edited so that its process or column lineage changed, leaves its
entities in Atlas for ever unless someone removes them (Atlas's Hive bridge has ``-deleteNonExisting`` for
the same need). Every complete run records what it produced (processes and column lineage, by type and
qualifiedName) for its **scope**: the Atlas target, the namespace and the scanned roots. ``scan --prune``
then deletes what the previous run of the same scope produced and this one did not:

* only after a complete run: no error, every batch acknowledged (a partial run would delete good lineage);
* only our process types, only what our own record says we made: never a dataset (other processes or
  hooks may use it), never another tool's entity; executions go with their process (composition);
* ``--prune-dry-run`` lists what would be deleted and deletes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from atlas_bridge.atlas.encoded import EncodedBatch

logger = logging.getLogger(__name__)

PRUNABLE_TYPES = ("atlas_bridge_process", "atlas_bridge_column_lineage")
"""What a run produces and may later take back; datasets are never pruned."""


def scope_key(target: str, namespace: str, roots: Sequence[str]) -> dict[str, Any]:
    """The scope a record belongs to (roots resolved, sorted: the same folders are the same scope)."""
    return {"target": target, "namespace": namespace, "roots": sorted(str(Path(r).resolve()) for r in roots)}


def record_path(state_dir: str | os.PathLike[str], scope: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(scope, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return Path(state_dir) / f"produced-{digest}.json"


class Produced:
    """The prunable entities a run's batches hold, collected as the batches go by."""

    def __init__(self) -> None:
        self.entities: set[tuple[str, str]] = set()

    def watch(self, batches: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for batch in batches:
            if isinstance(batch, EncodedBatch):  # its entities' names are known without decoding it
                self.entities.update((t, qn) for _, t, qn in batch.names if t in PRUNABLE_TYPES)
                yield batch
                continue
            for entity in batch.get("entities") or []:
                qn = (entity.get("attributes") or {}).get("qualifiedName")
                if entity.get("typeName") in PRUNABLE_TYPES and isinstance(qn, str):
                    self.entities.add((str(entity["typeName"]), qn))
            yield batch


def read_record(path: Path) -> set[tuple[str, str]] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {(str(t), str(q)) for t, q in data["entities"] if t in PRUNABLE_TYPES}
    except (ValueError, KeyError, TypeError) as e:
        logger.warning("%s is unreadable (%s); nothing will be pruned this time", path, e)
        return None


def write_record(path: Path, scope: Mapping[str, Any], entities: set[tuple[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    body = {"scope": dict(scope), "entities": sorted([t, q] for t, q in entities)}
    tmp.write_text(json.dumps(body, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def stale_entities(
    previous: set[tuple[str, str]] | None, current: set[tuple[str, str]]
) -> list[tuple[str, str]]:
    """What the previous run of the scope produced and this one did not, processes last (their column
    lineage goes first, so nothing is left pointing at a deleted process)."""
    if previous is None:
        return []
    order = {t: i for i, t in enumerate(reversed(PRUNABLE_TYPES))}
    return sorted(previous - current, key=lambda e: (order.get(e[0], 0), e[1]))


def prune(client: Any, stale: Sequence[tuple[str, str]], *, dry_run: bool) -> tuple[int, list[str]]:
    """Delete ``stale`` (by type and qualifiedName); returns (deleted, errors). Nothing when dry."""
    from atlas_bridge.errors import AtlasError

    if dry_run:
        return 0, []
    deleted, errors = 0, []
    for type_name, qn in stale:
        try:
            client.delete_entity_by_qualified_name(type_name, qn)
            deleted += 1
        except AtlasError as e:
            errors.append(f"prune {type_name} {qn}: {e}")
    return deleted, errors
