"""OpenLineage events -> the model -> Atlas entities: validation, the mapping, convergence in any order."""

from __future__ import annotations

import copy
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.atlas.convert import to_atlas_entities
from atlas_bridge.openlineage.read import lineage_from_events, read_events
from atlas_bridge.openlineage.schema import validate_event
from tests.golden import assert_golden

DATA = Path(__file__).parent / "data" / "openlineage"
EVENT_FILES = sorted(p for p in DATA.glob("*.json*") if not p.name.startswith("invalid"))


def load(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def entities(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    read = read_events(events)
    assert read.result.problems == ()
    return to_atlas_entities(read.result.lineage, namespace="primary", runs=read.runs)


@pytest.mark.parametrize("path", EVENT_FILES, ids=lambda p: p.name)
def test_events_are_valid(path: Path) -> None:
    for event in load(path):
        assert validate_event(event) == []


@pytest.mark.parametrize("path", EVENT_FILES, ids=lambda p: p.name)
def test_golden(path: Path, update_golden: bool) -> None:
    assert_golden(entities(load(path)), f"openlineage/{path.stem}.json", update_golden)


@pytest.mark.parametrize("path", EVENT_FILES, ids=lambda p: p.name)
def test_any_order_converges(path: Path) -> None:
    events = load(path)
    expected = entities(events)
    orders = list(itertools.permutations(events)) if len(events) <= 5 else []
    rng = random.Random(7)
    for _ in range(10):
        shuffled = list(events)
        rng.shuffle(shuffled)
        orders.append(tuple(shuffled))
    for order in orders[:130]:
        assert entities(list(order)) == expected


def test_pieces_converge() -> None:
    """A run's facets split over events (each event one output facet) give the same entities."""
    events = load(DATA / "spark_insert_hive.jsonl")
    pieces: list[dict[str, Any]] = []
    for event in events:
        for out in event.get("outputs", []):
            for name, facet in out.get("facets", {}).items():
                piece = copy.deepcopy(event)
                piece["outputs"] = [
                    {"namespace": out["namespace"], "name": out["name"], "facets": {name: facet}}
                ]
                if name != "symlinks" and "symlinks" in out["facets"]:
                    piece["outputs"][0]["facets"]["symlinks"] = out["facets"]["symlinks"]
                pieces.append(piece)
        bare = copy.deepcopy(event)
        bare.pop("outputs", None)
        pieces.append(bare)
    assert entities(list(reversed(pieces))) == entities(events)


def test_validation_names_the_field() -> None:
    event = load(DATA / "spark_insert_hive.jsonl")[0]
    bad = copy.deepcopy(event)
    bad["run"]["runId"] = "run-1"
    del bad["job"]["name"]
    bad["eventTime"] = "yesterday"
    bad["inputs"][0]["facets"]["schema"]["fields"][1] = {"type": "long"}
    assert validate_event(bad) == [
        "eventTime: 'yesterday' is not a 'date-time'",
        "inputs[0].facets.schema.fields[1]: 'name' is a required property",
        "job: 'name' is a required property",
        "run.runId: 'run-1' is not a 'uuid'",
    ]
    assert validate_event({"eventType": "START"})[0] == "(event): 'eventTime' is a required property"


def test_invalid_event_is_a_problem_not_an_exception() -> None:
    good = load(DATA / "spark_insert_hive.jsonl")
    bad = copy.deepcopy(good[0])
    del bad["producer"]
    result = lineage_from_events([bad, "not an object", *good], source="events.jsonl")  # type: ignore[list-item]
    messages = [(p.file, p.message) for p in result.problems]
    assert messages == [
        (
            "events.jsonl",
            "event 1: not a valid OpenLineage event: (event): 'producer' is a required property",
        ),
        (
            "events.jsonl",
            "event 2: not a valid OpenLineage event: (event): 'not an object' is not of type 'object'",
        ),
    ]
    assert result.lineage == lineage_from_events(good, source="events.jsonl").lineage


def test_failed_run_keeps_lineage_and_says_why() -> None:
    events = load(DATA / "spark_insert_hive.jsonl")
    fail = copy.deepcopy(events[1])
    fail["eventType"] = "FAIL"
    fail["run"]["facets"] = {
        "errorMessage": {
            "_producer": "https://example.com/p",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json",
            "message": "Job aborted due to stage failure\n\tat org.apache.spark...",
            "programmingLanguage": "JAVA",
        }
    }
    ok = entities(events)
    failed = entities([events[0], fail])
    strip = {"atlas_bridge_process_execution"}
    assert [e for e in failed if e["typeName"] not in strip] == [e for e in ok if e["typeName"] not in strip]
    (execution,) = [e["attributes"] for e in failed if e["typeName"] in strip]
    assert execution["status"] == "FAILED"
    assert execution["message"] == "Job aborted due to stage failure"
    assert execution["endTime"] > execution["startTime"]
    running = [e["attributes"] for e in entities([events[0]]) if e["typeName"] in strip]
    assert running[0]["status"] == "RUNNING"
    assert "endTime" not in running[0]
