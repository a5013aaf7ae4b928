"""Stage 4 (driver): send or write the batches, one at a time, with resume state per target."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from atlas_bridge.bridge.types import Progress
from atlas_bridge.errors import AtlasBridgeError, AtlasUnavailableError

logger = logging.getLogger(__name__)


class Delivery(Protocol):
    """Where batches go. ``send`` returns Atlas's (created, updated) counts, or None when there is no Atlas
    answer (files). It raises :class:`~atlas_bridge.errors.AtlasError` when the batch was not acknowledged."""

    target: str
    """A stable name of the destination; resume state is kept per target."""

    def send(self, batch: dict[str, Any]) -> tuple[int, int] | None: ...

    def close(self) -> None: ...


class SinkDelivery:
    """Delivery through a :class:`atlas_bridge.atlas.sink.Sink` (``emit`` / ``close``).

    A sink with a ``report`` (``AtlasSink``'s ``PushReport``) gives created / updated counts; a batch it
    spooled instead of delivering is *not* acknowledged, so it is raised as unavailable and the resume
    state does not record it.
    """

    def __init__(self, sink: Any, target: str) -> None:
        self.sink = sink
        self.target = target

    def send(self, batch: dict[str, Any]) -> tuple[int, int] | None:
        report = getattr(self.sink, "report", None)
        if report is None:
            self.sink.emit(batch)
            return None
        created, updated, spooled = report.created, report.updated, report.spooled
        self.sink.emit(batch)
        if report.spooled > spooled:
            msg = "Atlas unavailable; the batch was kept in the sink's spool"
            raise AtlasUnavailableError(msg)
        return report.created - created, report.updated - updated

    def close(self) -> None:
        self.sink.close()


class ClientDelivery:
    """Delivery straight to Atlas through an ``AtlasClient`` (``post_entities``)."""

    def __init__(self, client: Any, target: str) -> None:
        self.client = client
        self.target = target

    def send(self, batch: dict[str, Any]) -> tuple[int, int] | None:
        response = self.client.post_entities(batch)
        return _mutations(response if isinstance(response, Mapping) else {})

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


def batch_hash(batch: Mapping[str, Any]) -> str:
    """Content hash of a batch: same bytes, same hash (keys sorted, no whitespace)."""
    data = json.dumps(batch, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class SentState:
    """Hashes of batches a target acknowledged, in an append-only JSON-lines file.

    One line per acknowledged batch, flushed and fsynced before the next batch goes out, so a run killed at
    any point loses at most the acknowledgement of the batch in flight (which is then sent again: harmless,
    Atlas upserts by qualifiedName). A torn last line is ignored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sent: set[str] = set()
        if path.exists():
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and isinstance(entry.get("hash"), str):
                        self._sent.add(entry["hash"])
        self._fh: io.TextIOWrapper | None = None

    @classmethod
    def for_target(cls, state_dir: str | os.PathLike[str], target: str) -> SentState:
        key = hashlib.sha256(target.encode("utf-8")).hexdigest()[:16]
        return cls(Path(state_dir) / f"sent-{key}.jsonl")

    def __contains__(self, digest: object) -> bool:
        return digest in self._sent

    def __len__(self) -> int:
        return len(self._sent)

    def record(self, digest: str, entities: int) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open across batches
        self._fh.write(json.dumps({"hash": digest, "entities": entities, "at": int(time.time())}) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._sent.add(digest)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def compact(self, keep: Iterable[str]) -> None:
        """Rewrite the file with only ``keep`` (this run's batches, all acknowledged), so it stays small."""
        self.close()
        wanted = [h for h in dict.fromkeys(keep) if h in self._sent]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for digest in wanted:
                fh.write(json.dumps({"hash": digest}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._sent = set(wanted)


@dataclasses.dataclass
class DeliveryStats:
    """Counts of one delivery."""

    batches: int = 0
    sent: int = 0
    skipped: int = 0
    entities: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    written: int = 0
    """Entities written to files (no Atlas answer to count created / updated from)."""
    errors: list[str] = dataclasses.field(default_factory=list)
    deliver_s: float = 0.0


def _batch_entity_count(batch: Mapping[str, Any]) -> int:
    return len(batch.get("entities") or []) + len(batch.get("referredEntities") or {})


def _mutations(response: Mapping[str, Any]) -> tuple[int, int]:
    mutated = response.get("mutatedEntities") or {}
    created = {e.get("guid") or id(e) for e in mutated.get("CREATE") or []}
    updated = {e.get("guid") or id(e) for k in ("UPDATE", "PARTIAL_UPDATE") for e in mutated.get(k) or []}
    return len(created), len(updated - created)


def deliver(
    batches: Iterable[dict[str, Any]],
    delivery: Delivery,
    state: SentState | None,
    *,
    skip_acknowledged: bool = True,
    progress: Progress | None = None,
    total: int | None = None,
) -> DeliveryStats:
    """Send ``batches`` in order, skipping those ``state`` says were acknowledged, recording each new ack.

    ``batches`` may be a generator (one body in memory at a time); then ``total`` says how many it yields.

    A batch Atlas rejects is an error and the next batch is tried (batches stand alone); when Atlas cannot
    be reached at all the delivery stops there, and the next run resumes from the first unacknowledged batch.
    """
    if total is None:
        batches = batches if isinstance(batches, Sequence) else list(batches)
        total = len(batches)
    stats = DeliveryStats(batches=total)
    digests: list[str] = []
    t0 = time.perf_counter()
    last_log = time.monotonic()
    for index, batch in enumerate(batches, start=1):
        digest = batch_hash(batch)
        digests.append(digest)
        count = _batch_entity_count(batch)
        stats.entities += count
        if skip_acknowledged and state is not None and digest in state:
            stats.skipped += 1
            stats.unchanged += count
        else:
            try:
                response = delivery.send(batch)
            except AtlasUnavailableError as e:
                stats.errors.append(f"batch {index}/{total}: {e}; stopped, re-run to resume")
                logger.error("delivery stopped at batch %d/%d: %s", index, total, e)
                break
            except AtlasBridgeError as e:
                stats.errors.append(f"batch {index}/{total}: {e}")
                logger.error("batch %d/%d refused: %s", index, total, e)
                continue
            stats.sent += 1
            if response is None:
                stats.written += count
            else:
                created, updated = response
                stats.created += created
                stats.updated += updated
                stats.unchanged += max(0, count - created - updated)
            if state is not None:
                state.record(digest, count)
        if progress is not None:
            progress("deliver", index, total)
        if time.monotonic() - last_log >= 10:
            logger.info("delivery: %d/%d batch(es)", index, total)
            last_log = time.monotonic()
    if state is not None and not stats.errors and len(state) > len(digests):
        state.compact(digests)  # every batch of this run is acknowledged: older hashes are of no use
    stats.deliver_s = time.perf_counter() - t0
    logger.info(
        "delivered %d batch(es) to %s (%d skipped as already acknowledged): "
        "%d created, %d updated, %d unchanged, %d written",
        stats.sent,
        delivery.target,
        stats.skipped,
        stats.created,
        stats.updated,
        stats.unchanged,
        stats.written,
    )
    return stats
