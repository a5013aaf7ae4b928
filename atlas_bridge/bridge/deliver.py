"""Stage 4 (driver): send or write the batches, one at a time, with resume state per target."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from atlas_bridge.atlas.encoded import EncodedBatch, as_dict
from atlas_bridge.atlas.reuse import post_batch
from atlas_bridge.bridge.types import Progress
from atlas_bridge.errors import (
    AtlasAuthError,
    AtlasBridgeError,
    AtlasError,
    AtlasNotFoundError,
    AtlasUnavailableError,
)

logger = logging.getLogger(__name__)


class Delivery(Protocol):
    """Where batches go. ``send`` returns Atlas's (created, updated) counts, or None when there is no Atlas
    answer (files). It raises :class:`~atlas_bridge.errors.AtlasError` when the batch was not acknowledged."""

    target: str
    """A stable name of the destination; resume state is kept per target."""

    def send(self, batch: Mapping[str, Any]) -> tuple[int, int] | None: ...

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

    def send(self, batch: Mapping[str, Any]) -> tuple[int, int] | None:
        report = getattr(self.sink, "report", None)
        if report is None:
            self.sink.emit(batch)
            return None
        created, updated, spooled = report.created, report.updated, report.spooled
        failed = len(report.failures)
        self.sink.emit(batch)
        if report.spooled > spooled:
            msg = "Atlas unavailable; the batch was kept in the sink's spool"
            raise AtlasUnavailableError(msg)
        if len(report.failures) > failed:  # refused, and kept by the sink with Atlas's answer
            raise AtlasError(report.failures[-1])
        return report.created - created, report.updated - updated

    def close(self) -> None:
        self.sink.close()


class ClientDelivery:
    """Delivery straight to Atlas through an ``AtlasClient`` (``post_entities``)."""

    def __init__(self, client: Any, target: str) -> None:
        self.client = client
        self.target = target

    def send(self, batch: Mapping[str, Any]) -> tuple[int, int] | None:
        response = self.client.post_entities(batch)
        return _mutations(response if isinstance(response, Mapping) else {})

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


class _KeepsUnsent:
    """What a delivery did not get acknowledged goes to ``unsent_dir``, a folder ``push`` replays."""

    unsent_dir: Path
    _unsent: Any = None

    def keep(self, batch: Mapping[str, Any], error: BaseException | None = None) -> None:
        """Write a batch that was not acknowledged to ``unsent_dir`` (added to what earlier runs kept
        there: only a push that delivers them removes those); a refused one with Atlas's answer beside."""
        if self._unsent is None:
            from atlas_bridge.atlas.sink import FileSink

            self._unsent = FileSink(self.unsent_dir)
        self._unsent.emit(batch, error=error)

    @property
    def kept(self) -> int:
        return len(self._unsent.files) if self._unsent is not None else 0


def is_not_an_atlas(error: AtlasError) -> bool:
    """A 404 without Atlas's own error code: the address (or its path) is not an Atlas, so no batch can
    be delivered there (Atlas's own 404s, a guid it does not know, carry ``ATLAS-404-...``)."""
    return isinstance(error, AtlasNotFoundError) and not (error.error_code or "").startswith("ATLAS-")


def not_an_atlas(error: AtlasError) -> AtlasUnavailableError:
    """The 404 of a wrong address as "Atlas not usable": the batches are kept, and the user told why."""
    base = (error.url or "").split("/api/atlas")[0] or "the configured address"
    msg = f"{error} - is {base} an Atlas? check the address (atlas.rest.address, --atlas, --to URL)"
    return AtlasUnavailableError(msg, status_code=error.status_code, url=error.url, body=error.body)


class AtlasDelivery(_KeepsUnsent):
    """Delivery to Atlas that never loses a batch: what Atlas does not acknowledge is kept as files.

    The first time Atlas cannot be reached (the client gave up within its bounded time) or refuses the
    login, the delivery stops talking to Atlas for the rest of the run: that batch and every later one are
    written to ``unsent_dir`` as a folder ``atlas-bridge push`` replays (typedefs first, in order). A login
    is never retried batch after batch, which could lock the account. A batch Atlas refuses for its content
    is an error of that batch only.
    """

    def __init__(
        self, client: Any, target: str, unsent_dir: str | os.PathLike[str], *, reuse: Any | None = None
    ) -> None:
        self.client = client
        self.reuse = reuse
        """An :class:`~atlas_bridge.atlas.reuse.EntityReuse`: other hooks' datasets are used, not made."""
        self.target = target
        self.unsent_dir = Path(unsent_dir)
        self.down: AtlasError | None = None
        """Why Atlas is no longer tried in this run (None while it answers)."""
        self.last_probe: dict[str, str] | None = None
        self._unsent: Any = None

    def send(self, batch: Mapping[str, Any]) -> tuple[int, int] | None:
        if self.down is not None:
            raise self.down
        try:
            response = post_batch(self.client, batch, self.reuse)
        except (AtlasUnavailableError, AtlasAuthError) as e:
            self.down = e
            raise
        except AtlasNotFoundError as e:
            if not is_not_an_atlas(e):
                raise
            self.down = not_an_atlas(e)
            raise self.down from e
        response = response if isinstance(response, Mapping) else {}
        self.last_probe = _probe(batch, response)
        return _mutations(response)

    def verify(self, probe: Mapping[str, Any]) -> str | None:
        """None when the entity a recorded acknowledgement points at is still in Atlas, else why not."""
        from atlas_bridge.errors import AtlasNotFoundError

        try:
            found = self.client.get_entity_by_guid(str(probe["guid"]))
        except AtlasNotFoundError:
            what = f"{probe.get('typeName')} {probe.get('qualifiedName')!r}"
            return f"{what} (guid {probe['guid']}) is not in Atlas"
        entity = found.get("entity") or {}
        qualified_name = (entity.get("attributes") or {}).get("qualifiedName")
        if entity.get("status", "ACTIVE") != "ACTIVE" or qualified_name != probe.get("qualifiedName"):
            return f"guid {probe['guid']} is no longer {probe.get('typeName')} {probe.get('qualifiedName')!r}"
        return None

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


class KafkaDelivery(_KeepsUnsent):
    """Delivery to Atlas's hook topic through a :class:`~atlas_bridge.atlas.kafka.KafkaPublisher`.

    Like :class:`AtlasDelivery`, nothing is lost: once no broker acknowledges a batch (or the brokers
    refuse our credentials), that batch and every later one go to ``unsent_dir`` for
    ``atlas-bridge push DIR --to kafka``. ``send`` returns None: the brokers acknowledge, Atlas applies
    the message later, so there are no created / updated counts to report.
    """

    def __init__(self, publisher: Any, target: str, unsent_dir: str | os.PathLike[str]) -> None:
        self.publisher = publisher
        self.target = target
        self.unsent_dir = Path(unsent_dir)
        self.down: AtlasError | None = None
        self._unsent: Any = None

    def send(self, batch: Mapping[str, Any]) -> tuple[int, int] | None:
        if self.down is not None:
            raise self.down
        try:
            self.publisher.post_entities(batch)
        except (AtlasUnavailableError, AtlasAuthError) as e:
            self.down = e
            raise
        return None

    def close(self) -> None:
        self.publisher.close()


def _probe(batch: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, str] | None:
    """One entity of an acknowledged batch, with the guid Atlas gave it: later runs check it still exists."""
    assigned = response.get("guidAssignments") or {}
    if isinstance(batch, EncodedBatch):  # its entities' names are known without decoding it
        for placeholder, type_name, qn in batch.names:
            guid = assigned.get(placeholder) or None
            if guid:
                return {"guid": guid, "typeName": type_name, "qualifiedName": qn}
        return None
    for entity in batch.get("entities") or []:
        guid = assigned.get(entity.get("guid")) or None
        qualified_name = (entity.get("attributes") or {}).get("qualifiedName")
        if guid and isinstance(qualified_name, str):
            return {"guid": guid, "typeName": str(entity.get("typeName")), "qualifiedName": qualified_name}
    return None


def batch_hash(batch: Mapping[str, Any]) -> str:
    """Content hash of a batch: same bytes, same hash (keys sorted, no whitespace)."""
    data = json.dumps(as_dict(batch), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
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
        self._probes: dict[str, dict[str, Any]] = {}
        """Batch hash -> one entity of it with the guid Atlas gave it (in recording order)."""
        if path.exists():
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and isinstance(entry.get("hash"), str):
                        self._sent.add(entry["hash"])
                        if isinstance(entry.get("probe"), dict) and "guid" in entry["probe"]:
                            self._probes[entry["hash"]] = entry["probe"]
        self._fh: io.TextIOWrapper | None = None

    @classmethod
    def for_target(cls, state_dir: str | os.PathLike[str], target: str) -> SentState:
        key = hashlib.sha256(target.encode("utf-8")).hexdigest()[:16]
        return cls(Path(state_dir) / f"sent-{key}.jsonl")

    def __contains__(self, digest: object) -> bool:
        return digest in self._sent

    def __len__(self) -> int:
        return len(self._sent)

    def record(self, digest: str, entities: int, probe: Mapping[str, Any] | None = None) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open across batches
        entry: dict[str, Any] = {"hash": digest, "entities": entities, "at": int(time.time())}
        if probe:
            entry["probe"] = self._probes[digest] = dict(probe)
        self._fh.write(json.dumps(entry, sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._sent.add(digest)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def sample(self, k: int = 3) -> list[dict[str, Any]]:
        """Up to ``k`` probes spread over the recorded batches (first, middle, last...)."""
        probes = list(self._probes.values())
        if len(probes) <= k:
            return probes
        step = (len(probes) - 1) / (k - 1)
        return [probes[round(i * step)] for i in range(k)]

    def forget(self) -> None:
        """Drop every acknowledgement: the next delivery sends everything."""
        self.close()
        self.path.unlink(missing_ok=True)
        self._sent.clear()
        self._probes.clear()

    def compact(self, keep: Iterable[str]) -> None:
        """Rewrite the file with only ``keep`` (this run's batches, all acknowledged), so it stays small."""
        self.close()
        wanted = [h for h in dict.fromkeys(keep) if h in self._sent]
        probes = self._probes
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")  # scans may share the folder
        with open(tmp, "w", encoding="utf-8") as fh:
            for digest in wanted:
                entry = {"hash": digest, "probe": probes[digest]} if digest in probes else {"hash": digest}
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._sent = set(wanted)
        self._probes = {h: probes[h] for h in wanted if h in probes}


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
    """Entities written to files, or published to Kafka (no Atlas answer to count created / updated from)."""
    kept: int = 0
    """Batches not acknowledged by Atlas and written to ``kept_dir`` instead (``push`` sends them)."""
    kept_dir: str | None = None
    refused: int = 0
    """Batches Atlas refused for their content (kept with its answer beside them when there is a keep)."""
    too_large: int = 0
    """Of those, refused as too large (HTTP 413): a smaller batch size is the cure."""
    interrupted: str | None = None
    """The signal that stopped the delivery at a batch boundary (``SIGINT``, ``SIGTERM``), if one did."""
    pruned: int = 0
    """Entities of earlier runs deleted by ``--prune`` (or listed, with ``--prune-dry-run``)."""
    prune_list: list[str] = dataclasses.field(default_factory=list)
    prune_note: str | None = None
    resume_reset: str | None = None
    """Why the resume state was dropped before this delivery (it did not match Atlas), if it was."""
    errors: list[str] = dataclasses.field(default_factory=list)
    deliver_s: float = 0.0


def check_resume_state(state: SentState, delivery: Any) -> str | None:
    """Trust acknowledgements only while Atlas still holds what they point at; else forget them.

    A sample of recorded entities (first, middle, last batch) is looked up by the guid Atlas gave them.
    An emptied, restored or rebuilt Atlas at the same address fails the check, and the whole run is sent
    again. When Atlas cannot be asked (down), the state is kept: nothing is sent in that run anyway.
    Returns why the state was dropped, or None.
    """
    verify = getattr(delivery, "verify", None)
    if not len(state) or not callable(verify):
        return None
    probes = state.sample()
    try:
        problems = [r for r in (verify(p) for p in probes) if r]
    except AtlasUnavailableError as e:
        logger.warning("cannot check the resume state against Atlas: %s", e)
        return None
    except AtlasError as e:
        problems = [str(e)]
    if not probes:
        problems = ["the state records no entity to check it by (written by an older version)"]
    if not problems:
        return None
    reason = f"resume state does not match Atlas ({problems[0]}); sending every batch again"
    logger.warning("%s", reason)
    state.forget()
    return reason


def _batch_entity_count(batch: Mapping[str, Any]) -> int:
    if isinstance(batch, EncodedBatch):
        return batch.entity_count  # no referredEntities in the scan's bodies
    return len(batch.get("entities") or []) + len(batch.get("referredEntities") or {})


def _mutations(response: Mapping[str, Any]) -> tuple[int, int]:
    mutated = response.get("mutatedEntities") or {}
    created = {e.get("guid") or id(e) for e in mutated.get("CREATE") or []}
    updated = {e.get("guid") or id(e) for k in ("UPDATE", "PARTIAL_UPDATE") for e in mutated.get(k) or []}
    return len(created), len(updated - created)


def deliver(
    batches: Iterable[Mapping[str, Any]],
    delivery: Delivery,
    state: SentState | None,
    *,
    skip_acknowledged: bool = True,
    progress: Progress | None = None,
    total: int | None = None,
    keep: Callable[..., None] | None = None,
    stop: Callable[[], str | None] | None = None,
) -> DeliveryStats:
    """Send ``batches`` in order, skipping those ``state`` says were acknowledged, recording each new ack.

    ``batches`` may be a generator (one body in memory at a time); then ``total`` says how many it yields.

    A batch Atlas rejects is an error and the next batch is tried (batches stand alone). When Atlas cannot
    be reached at all, or refuses the login, nothing more is sent: with ``keep``, that batch and every later
    one are handed to it (written to disk for ``push``); without, the delivery stops there and the next run
    resumes from the first unacknowledged batch. With ``keep``, a batch Atlas refuses is kept too, with
    Atlas's answer (``keep(batch, error)``).

    ``stop()`` is asked before each batch; when it names a reason (a signal), nothing more is sent: the
    remaining batches are kept (with ``keep``) and ``interrupted`` says why.
    """
    stopped = False
    if total is None:
        batches = batches if isinstance(batches, Sequence) else list(batches)
        total = len(batches)
    stats = DeliveryStats(batches=total)
    digests: list[str] = []
    t0 = time.perf_counter()
    last_log = time.monotonic()
    for index, batch in enumerate(batches, start=1):
        digest = batch_hash(batch) if state is not None else ""  # no record kept: no hash needed
        digests.append(digest)
        count = _batch_entity_count(batch)
        stats.entities += count
        if stats.interrupted is None and stop is not None:
            stats.interrupted = stop()
            if stats.interrupted is not None:
                logger.warning("%s: delivery stopped before batch %d/%d", stats.interrupted, index, total)
                if keep is None:
                    break
        if skip_acknowledged and state is not None and digest in state:
            stats.skipped += 1
            stats.unchanged += count
        elif keep is not None and (stopped or stats.interrupted is not None):
            keep(batch)
            stats.kept += 1
        else:
            try:
                response = delivery.send(batch)
            except (AtlasUnavailableError, AtlasAuthError) as e:
                if keep is None:
                    stats.errors.append(f"batch {index}/{total}: {e}; stopped, re-run to resume")
                    logger.error("delivery stopped at batch %d/%d: %s", index, total, e)
                    break
                stopped = True
                stats.errors.append(f"batch {index}/{total}: {e}; this and later batches kept on disk")
                # Said already (before the extraction) when Atlas was found unusable at the start.
                said = getattr(delivery, "down_said", None) is e
                (logger.info if said else logger.error)(
                    "Atlas not usable from batch %d/%d on: %s", index, total, e
                )
                keep(batch)
                stats.kept += 1
                continue
            except AtlasBridgeError as e:
                stats.refused += 1
                if getattr(e, "status_code", None) == 413:
                    stats.too_large += 1
                if keep is None:
                    stats.errors.append(f"batch {index}/{total}: {e}")
                    logger.error("batch %d/%d refused: %s", index, total, e)
                    continue
                keep(batch, e)
                stats.kept += 1
                stats.errors.append(f"batch {index}/{total}: {e}; kept with Atlas's answer beside it")
                logger.error("batch %d/%d refused, kept with Atlas's answer beside it: %s", index, total, e)
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
                state.record(digest, count, getattr(delivery, "last_probe", None))
        if progress is not None:
            progress("deliver", index, total)
        if time.monotonic() - last_log >= 10:
            logger.info("delivery: %d/%d batch(es)", index, total)
            last_log = time.monotonic()
    if state is not None and not stats.errors and not stats.interrupted and len(state) > len(digests):
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
