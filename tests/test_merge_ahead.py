"""The driver merges the first round's partitions while the extraction job runs (``job._MergeAhead``):
in partition order, each only once its task has ended, stopped at once when the schema learned sends
units to a second round. Spark's side is a fake here (the scan tests run the real one)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.bridge.job import ExtractStats, _MergeAhead
from atlas_bridge.bridge.merge import EntityCollector

WAIT_S = 10.0  # a bound, never a pause: every wait below ends as soon as its event is set


def _rows(part: int) -> list[tuple[str, int, Any]]:
    """Partition ``part`` holds unit ``part``: its records, its file counts, then the partition header."""
    column = f"db.t{part}.c@ns"
    unit = {
        "datasets": [
            {
                "tier": 1,
                "group": f"db.t{part}@ns",
                "typeName": "atlas_bridge_column",
                "qualifiedName": column,
                "attributes": {"qualifiedName": column, "name": "c"},
                "refs": {},
            }
        ],
        "process_lines": [],
        "unused": [],
        "kinds": {f"t{part}": "table"},
    }
    files = {f"f{part}.sql": {"kind": "sql", "statements": part + 1, "units": 1, "users": []}}
    header = {"files": {}, "problems": [], "max_rss_kb": 100 + part, "cpu_s": 0.5}
    return [
        ("unit", part, json.dumps(unit)),
        ("uhead", part, json.dumps({"files": files, "problems": []})),
        ("header", -1, json.dumps(header)),
    ]


class _Round:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.done: set[int] = set()
        self.complete = threading.Event()
        self.rdd: _Results | None = None

    def finished(self, part: int) -> bool:
        return self.complete.is_set() or part in self.done


class _Results:
    """The kept results, read as PySpark's ``toLocalIterator`` reads them: a partition is asked for (a job
    of its own) when the caller wants the row after the previous partition's last one."""

    def __init__(self, r: _Round, fail_on: int | None = None) -> None:
        self.round = r
        self.reads: list[int] = []
        self.early: list[int] = []  # reads of a partition whose task had not ended
        self.read = {p: threading.Event() for p in range(r.partitions)}
        self.fail_on = fail_on
        self.stuck: int | None = None  # a partition whose read waits until it is cancelled
        self._unstuck = threading.Event()

    def unstick(self) -> None:
        self._unstuck.set()

    def toLocalIterator(self) -> Iterator[tuple[str, int, Any]]:
        for part in range(self.round.partitions):
            if not self.round.finished(part):
                self.early.append(part)
            self.reads.append(part)
            self.read[part].set()
            if part == self.fail_on:
                raise RuntimeError("the read failed")
            if part == self.stuck:
                assert self._unstuck.wait(WAIT_S)
                raise RuntimeError("the read's job was cancelled")
            yield from _rows(part)


class _Context:
    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.groups: list[str] = []
        self.on_cancel: Callable[[], None] | None = None

    def setLocalProperty(self, key: str, value: str) -> None:
        pass

    def setJobGroup(self, group: str, description: str) -> None:
        self.groups.append(group)

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)
        if self.on_cancel is not None:
            self.on_cancel()


def _ahead(
    tmp_path: Path, partitions: int, fail_on: int | None = None
) -> tuple[_MergeAhead, _Round, _Results, _Context]:
    r = _Round(partitions)
    results = r.rdd = _Results(r, fail_on)
    sc = _Context()
    return _MergeAhead(sc, EntityCollector(tmp_path / "spill"), partitions, per_unit=True), r, results, sc


def test_partitions_are_merged_in_order_each_once_its_task_has_ended(tmp_path: Path) -> None:
    ahead, r, results, _ = _ahead(tmp_path, 3)
    r.done.add(1)  # partition 1 ends first: it waits for partition 0
    ahead.start(r)  # type: ignore[arg-type]
    r.done.add(0)
    assert results.read[1].wait(WAIT_S)
    assert results.reads == [0, 1]
    r.complete.set()  # the job ended: partition 2 is kept too
    ahead.finish(None)
    assert results.reads == [0, 1, 2]
    assert results.early == []
    assert ahead.merged == 3
    stats = ExtractStats()
    stats.absorb(ahead.stats)
    assert stats.statements == 1 + 2 + 3
    assert sorted(stats.files) == ["f0.sql", "f1.sql", "f2.sql"]
    assert stats.executor_max_rss_kb == 102
    assert stats.executor_cpu_s == pytest.approx(1.5)
    ahead._collector.finish()
    assert ahead._collector.counts()["datasets"] == 3


def test_a_cancelled_merge_stops_at_the_next_partition(tmp_path: Path) -> None:
    ahead, r, results, sc = _ahead(tmp_path, 3)
    r.done.add(0)
    ahead.start(r)  # type: ignore[arg-type]
    assert results.read[0].wait(WAIT_S)
    ahead.cancel()
    assert sc.cancelled == []  # it stopped by itself: no job cancelled (Spark would log a stack trace)
    r.done.update((1, 2))
    assert results.reads == [0]
    ahead.cancel()  # again: nothing left to stop


def test_a_read_that_does_not_end_is_cancelled_with_its_job_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from atlas_bridge.bridge import job

    monkeypatch.setattr(job, "_STOP_GRACE_S", 0.05)  # a bound: the read below never ends by itself
    ahead, r, results, sc = _ahead(tmp_path, 2)
    results.stuck = 1
    sc.on_cancel = results.unstick
    r.done.update((0, 1))
    ahead.start(r)  # type: ignore[arg-type]
    assert results.read[1].wait(WAIT_S)
    ahead.cancel()
    assert sc.cancelled == sc.groups  # the read under way was cancelled with its job group
    assert results.reads == [0, 1]
    assert ahead.merged == 1


def test_a_failed_read_is_the_callers_error(tmp_path: Path) -> None:
    ahead, r, results, _ = _ahead(tmp_path, 2, fail_on=1)
    ahead.start(r)  # type: ignore[arg-type]
    r.complete.set()
    with pytest.raises(RuntimeError, match="the read failed"):
        ahead.finish(None)
    assert results.reads == [0, 1]
