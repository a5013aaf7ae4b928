"""Is this OpenLineage? Events checked by ``jsonschema`` against a JSON Schema of the OpenLineage spec 2-0-2.

The schema below states, in JSON Schema, what the OpenLineage spec's ``OpenLineage.json`` (2-0-2) and its
facet schemas (``SchemaDatasetFacet`` 1-2-0, ``ColumnLineageDatasetFacet`` 1-2-0, ``SQLJobFacet`` 1-1-0,
``SymlinksDatasetFacet`` 1-0-1) require of the parts atlas-bridge reads: the run, job and dataset
events with their required fields and formats (``eventTime`` a date-time, ``producer`` and ``schemaURL``
URIs, ``runId`` a UUID, ``eventType`` one of the six states), and every facet with its ``_producer`` and
``_schemaURL``. Like the spec, it allows any other property (custom facets, newer fields), so an event
from a newer producer is still valid. It is written here rather than copied from the spec's repository;
``jsonschema`` does the checking, never hand-written code.

The kind of event is told first (``run`` -> RunEvent, else ``job`` -> JobEvent, else ``dataset`` ->
DatasetEvent) and the event checked against that kind alone: the spec's ``oneOf`` of the three would only
say "not valid under any of the given schemas", where one schema names the field that is wrong.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from typing import Any

import jsonschema

SPEC_VERSION = "2-0-2"
"""The OpenLineage spec version the schema follows (``https://openlineage.io/spec/2-0-2/OpenLineage.json``)."""

MAX_MESSAGES = 20
"""At most this many problems are reported for one event (the first ones, in document order)."""

_URI = {"type": "string", "format": "uri"}
_BASE_FACET: dict[str, Any] = {
    "type": "object",
    "properties": {"_producer": _URI, "_schemaURL": _URI, "_deleted": {"type": "boolean"}},
    "required": ["_producer", "_schemaURL"],
}
_FACETS: dict[str, Any] = {"type": "object", "additionalProperties": {"$ref": "#/$defs/BaseFacet"}}

_SCHEMA_FIELD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "type": {"type": "string"},
        "description": {"type": "string"},
        "ordinal_position": {"type": "integer"},
        "fields": {"type": "array", "items": {"$ref": "#/$defs/SchemaField"}},
    },
    "required": ["name"],
}
_INPUT_FIELD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "namespace": {"type": "string"},
        "name": {"type": "string"},
        "field": {"type": "string"},
        "transformations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "subtype": {"type": "string"},
                    "description": {"type": "string"},
                    "masking": {"type": "boolean"},
                },
                "required": ["type"],
            },
        },
    },
    "required": ["namespace", "name", "field"],
}
_DATASET_FACETS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "schema": {
            "allOf": [
                {"$ref": "#/$defs/BaseFacet"},
                {
                    "type": "object",
                    "properties": {"fields": {"type": "array", "items": {"$ref": "#/$defs/SchemaField"}}},
                },
            ]
        },
        "columnLineage": {
            "allOf": [
                {"$ref": "#/$defs/BaseFacet"},
                {
                    "type": "object",
                    "properties": {
                        "fields": {
                            "type": "object",
                            "additionalProperties": {
                                "type": "object",
                                "properties": {
                                    "inputFields": {"type": "array", "items": {"$ref": "#/$defs/InputField"}},
                                    "transformationDescription": {"type": "string"},
                                    "transformationType": {"type": "string"},
                                },
                                "required": ["inputFields"],
                            },
                        },
                        "dataset": {"type": "array", "items": {"$ref": "#/$defs/InputField"}},
                    },
                    "required": ["fields"],
                },
            ]
        },
        "symlinks": {
            "allOf": [
                {"$ref": "#/$defs/BaseFacet"},
                {
                    "type": "object",
                    "properties": {
                        "identifiers": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "namespace": {"type": "string"},
                                    "name": {"type": "string"},
                                    "type": {"type": "string"},
                                },
                                "required": ["namespace", "name", "type"],
                            },
                        }
                    },
                },
            ]
        },
    },
    "additionalProperties": {"$ref": "#/$defs/BaseFacet"},
}
_JOB: dict[str, Any] = {
    "type": "object",
    "properties": {
        "namespace": {"type": "string"},
        "name": {"type": "string"},
        "facets": {
            "type": "object",
            "properties": {
                "sql": {
                    "allOf": [
                        {"$ref": "#/$defs/BaseFacet"},
                        {
                            "type": "object",
                            "properties": {"query": {"type": "string"}, "dialect": {"type": "string"}},
                            "required": ["query"],
                        },
                    ]
                }
            },
            "additionalProperties": {"$ref": "#/$defs/BaseFacet"},
        },
    },
    "required": ["namespace", "name"],
}
_DATASET: dict[str, Any] = {
    "type": "object",
    "properties": {
        "namespace": {"type": "string"},
        "name": {"type": "string"},
        "facets": {"$ref": "#/$defs/DatasetFacets"},
        "inputFacets": _FACETS,
        "outputFacets": _FACETS,
    },
    "required": ["namespace", "name"],
}
_BASE_EVENT: dict[str, Any] = {
    "eventTime": {"type": "string", "format": "date-time"},
    "producer": _URI,
    "schemaURL": _URI,
}
_DATASETS = {"type": "array", "items": {"$ref": "#/$defs/Dataset"}}
_DEFS: dict[str, Any] = {
    "BaseFacet": _BASE_FACET,
    "SchemaField": _SCHEMA_FIELD,
    "InputField": _INPUT_FIELD,
    "DatasetFacets": _DATASET_FACETS,
    "Dataset": _DATASET,
    "Job": _JOB,
}

RUN_EVENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": _DEFS,
    "type": "object",
    "properties": {
        **_BASE_EVENT,
        "eventType": {"enum": ["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]},
        "run": {
            "type": "object",
            "properties": {"runId": {"type": "string", "format": "uuid"}, "facets": _FACETS},
            "required": ["runId"],
        },
        "job": {"$ref": "#/$defs/Job"},
        "inputs": _DATASETS,
        "outputs": _DATASETS,
    },
    "required": ["eventTime", "producer", "schemaURL", "run", "job"],
}
"""A RunEvent (``#/$defs/RunEvent`` of the spec)."""

JOB_EVENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": _DEFS,
    "type": "object",
    "properties": {**_BASE_EVENT, "job": {"$ref": "#/$defs/Job"}, "inputs": _DATASETS, "outputs": _DATASETS},
    "required": ["eventTime", "producer", "schemaURL", "job"],
}
"""A JobEvent (``#/$defs/JobEvent``): a job's inputs and outputs, no run."""

DATASET_EVENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": _DEFS,
    "type": "object",
    "properties": {**_BASE_EVENT, "dataset": {"$ref": "#/$defs/Dataset"}},
    "required": ["eventTime", "producer", "schemaURL", "dataset"],
    "not": {"anyOf": [{"required": ["job"]}, {"required": ["run"]}]},
}
"""A DatasetEvent (``#/$defs/DatasetEvent``): a dataset's facets, no job or run."""


_FORMATS = jsonschema.FormatChecker(formats=("uuid",))
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S*$")


@_FORMATS.checks("uri", raises=())  # type: ignore[untyped-decorator,misc]
def _is_uri(value: object) -> bool:
    """An absolute URI: a scheme, then no white space (what RFC 3986 asks that matters for a producer)."""
    return not isinstance(value, str) or bool(_SCHEME.match(value))


@_FORMATS.checks("date-time", raises=ValueError)  # type: ignore[untyped-decorator,misc]
def _is_date_time(value: object) -> bool:
    """An RFC 3339 date-time: a date, a time and an offset (``Z`` or ``+hh:mm``)."""
    if not isinstance(value, str):
        return True
    text = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
    if text.lower()[10:11] not in ("t", " "):
        msg = "no time"
        raise ValueError(msg)
    parsed = datetime.datetime.fromisoformat(text.replace("t", "T", 1).replace(" ", "T", 1))
    if parsed.tzinfo is None:
        msg = "no offset"
        raise ValueError(msg)
    return True


_VALIDATORS = {
    name: jsonschema.Draft202012Validator(schema, format_checker=_FORMATS)
    for name, schema in (
        ("RunEvent", RUN_EVENT_SCHEMA),
        ("JobEvent", JOB_EVENT_SCHEMA),
        ("DatasetEvent", DATASET_EVENT_SCHEMA),
    )
}


def event_kind(obj: Any) -> str:
    """``RunEvent``, ``JobEvent`` or ``DatasetEvent``: what an event says it is (a run makes a RunEvent).

    >>> event_kind({"run": {}, "job": {}}), event_kind({"job": {}}), event_kind({"dataset": {}})
    ('RunEvent', 'JobEvent', 'DatasetEvent')
    """
    if isinstance(obj, dict) and "run" not in obj:
        if "job" in obj:
            return "JobEvent"
        if "dataset" in obj:
            return "DatasetEvent"
    return "RunEvent"


def validate_event(obj: Any) -> list[str]:
    """What makes ``obj`` not a valid OpenLineage event, one message per problem; empty when it is valid.

    Each message names the field (a path such as ``run.runId`` or ``outputs[0].facets.schema``) and why.

    >>> validate_event({"eventTime": "2026-11-27T10:00:00Z", "producer": "https://example.com/p",
    ...     "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    ...     "eventType": "START", "run": {"runId": "not-a-uuid"}, "job": {"namespace": "n"}})
    ["job: 'name' is a required property", "run.runId: 'not-a-uuid' is not a 'uuid'"]
    >>> print(validate_event([])[0])
    (event): [] is not of type 'object'
    """
    kind = event_kind(obj)
    messages = sorted(_messages(_VALIDATORS[kind].iter_errors(obj)))
    if len(messages) > MAX_MESSAGES:
        messages = [*messages[:MAX_MESSAGES], f"... and {len(messages) - MAX_MESSAGES} more problems"]
    return messages


def _messages(errors: Iterator[jsonschema.ValidationError]) -> Iterator[str]:
    for error in errors:
        if error.context:  # an allOf / anyOf: its own sub-errors say which field
            yield from _messages(iter(error.context))
            continue
        yield f"{_path(error.absolute_path)}: {_short(error.message)}"


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(event)"


def _short(message: str, limit: int = 200) -> str:
    """jsonschema quotes the whole offending value: a big facet would make a message of kilobytes."""
    return message if len(message) <= limit else message[: limit - 3] + "..."
