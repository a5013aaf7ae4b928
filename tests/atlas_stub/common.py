"""What the stub's modules share: constants, the HTTP error, request records, small helpers."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_BASE_URL = "http://atlas.test:21000"


BASE_MODEL = Path(__file__).parent.parent / "data" / "atlas" / "0010-base_model.json"


PRIMITIVES = {
    "boolean",
    "byte",
    "short",
    "int",
    "long",
    "float",
    "double",
    "biginteger",
    "bigdecimal",
    "string",
    "date",
}


_TYPE_NAME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_ ]*$")  # §2.1 ATLAS-400-00-019


_DEF_KEYS = (
    ("enumDefs", "ENUM"),
    ("structDefs", "STRUCT"),
    ("classificationDefs", "CLASSIFICATION"),
    ("entityDefs", "ENTITY"),
    ("relationshipDefs", "RELATIONSHIP"),
    ("businessMetadataDefs", "BUSINESS_METADATA"),
)


_CATEGORY_KEY = {cat: key for key, cat in _DEF_KEYS}


_LINEAGE_RELATIONSHIPS = {"dataset_process_inputs": "inputs", "process_dataset_outputs": "outputs"}


_HEADER_ATTRS = ("qualifiedName", "name", "description", "owner", "createTime")  # §2.6


class AtlasHTTPError(Exception):
    """Raised inside the stub to answer with an Atlas error body (§2.1)."""

    def __init__(self, status: int, code: str | None, message: str, *, raw: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.raw = raw

    def body(self) -> str:
        if self.raw is not None:
            return self.raw if isinstance(self.raw, str) else json.dumps(self.raw)
        return json.dumps({"errorCode": self.code, "errorMessage": self.message})


@dataclass
class Received:
    """One request as the stub saw it."""

    method: str
    path: str
    params: dict[str, list[str]]
    body: Any
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    status: int | None  # None = connection refused
    headers: dict[str, str]
    body: str
    times: int | None  # None = until cleared
    path_contains: str | None


@dataclass
class _RelAttr:
    """An attribute an entity type gets from one end of a relationshipDef."""

    relationship: str
    end: int  # 1 or 2: the end this attribute sits on
    name: str
    cardinality: str
    other_type: str
    is_container: bool
    category: str
    is_legacy: bool


def _kv(mapping: dict[str, Any], sep: str) -> str:
    return ", ".join(f"{k}{sep}{v}" for k, v in sorted(mapping.items()))


def _e007(detail: str) -> AtlasHTTPError:
    """§2.1: missing required attribute or bad value: 404 (not 400) ATLAS-404-00-007."""
    return AtlasHTTPError(
        404, "ATLAS-404-00-007", f"Invalid instance creation/updation parameters passed : {detail}"
    )


def _relation(src: str, dst: str, edge_guid: str) -> dict[str, str]:
    return {"fromEntityId": src, "toEntityId": dst, "relationshipId": edge_guid}


def _public_def(d: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(d)


_MISSING = object()


def iter_typedefs(typesdef: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(category, def) over an AtlasTypesDef."""
    for key, category in _DEF_KEYS:
        for d in typesdef.get(key) or []:
            yield category, d


def names(defs: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(d["name"] for d in defs)
