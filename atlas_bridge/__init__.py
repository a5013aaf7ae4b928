"""atlas-bridge: SQL and Spark lineage, table- and column-level, into Apache Atlas.

The public API is what ``__all__`` lists. Names are imported lazily so that ``import atlas_bridge`` stays
cheap inside a Spark driver and pulls in neither sqlglot nor requests until they are used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "AtlasAuthError": "atlas_bridge.errors",
    "AtlasBridgeError": "atlas_bridge.errors",
    "AtlasClient": "atlas_bridge.atlas.client",
    "AtlasConflictError": "atlas_bridge.errors",
    "AtlasError": "atlas_bridge.errors",
    "AtlasNotFoundError": "atlas_bridge.errors",
    "AtlasSink": "atlas_bridge.atlas.sink",
    "AtlasUnavailableError": "atlas_bridge.errors",
    "ClauseType": "atlas_bridge.model",
    "Column": "atlas_bridge.model",
    "ColumnRef": "atlas_bridge.model",
    "ConfigError": "atlas_bridge.errors",
    "Dataset": "atlas_bridge.model",
    "DatasetKind": "atlas_bridge.model",
    "Effect": "atlas_bridge.model",
    "ExtractionError": "atlas_bridge.errors",
    "ExtractionResult": "atlas_bridge.model",
    "FileSink": "atlas_bridge.atlas.sink",
    "FlowKind": "atlas_bridge.model",
    "KafkaSink": "atlas_bridge.atlas.sink",
    "Lineage": "atlas_bridge.model",
    "Problem": "atlas_bridge.model",
    "Process": "atlas_bridge.model",
    "Relation": "atlas_bridge.model",
    "RelationType": "atlas_bridge.model",
    "RunInfo": "atlas_bridge.atlas.convert",
    "Settings": "atlas_bridge.config",
    "TableLineage": "atlas_bridge.graph",
    "UnsafeInputError": "atlas_bridge.errors",
    "end_to_end": "atlas_bridge.graph",
    "extract_sql_lineage": "atlas_bridge.extractors.sql",
    "extract_sqlflow_lineage": "atlas_bridge.sqlflow.read",
    "load_typedefs": "atlas_bridge.atlas.typedefs",
    "make_sink": "atlas_bridge.atlas.sink",
    "merge_lineage": "atlas_bridge.model",
    "push_directory": "atlas_bridge.atlas.sink",
    "register_typedefs": "atlas_bridge.atlas.typedefs",
    "table_level": "atlas_bridge.graph",
    "to_atlas_batches": "atlas_bridge.atlas.convert",
    "to_atlas_entities": "atlas_bridge.atlas.convert",
    "to_sqlflow_json": "atlas_bridge.sqlflow.write",
    "to_sqlflow_xml": "atlas_bridge.sqlflow.write",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.convert import RunInfo, to_atlas_batches, to_atlas_entities
    from atlas_bridge.atlas.sink import AtlasSink, FileSink, KafkaSink, make_sink, push_directory
    from atlas_bridge.atlas.typedefs import load_typedefs, register_typedefs
    from atlas_bridge.config import Settings
    from atlas_bridge.errors import (
        AtlasAuthError,
        AtlasBridgeError,
        AtlasConflictError,
        AtlasError,
        AtlasNotFoundError,
        AtlasUnavailableError,
        ConfigError,
        ExtractionError,
        UnsafeInputError,
    )
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.graph import TableLineage, end_to_end, table_level
    from atlas_bridge.model import (
        ClauseType,
        Column,
        ColumnRef,
        Dataset,
        DatasetKind,
        Effect,
        ExtractionResult,
        FlowKind,
        Lineage,
        Problem,
        Process,
        Relation,
        RelationType,
        merge_lineage,
    )
    from atlas_bridge.sqlflow.read import extract_sqlflow_lineage
    from atlas_bridge.sqlflow.write import to_sqlflow_json, to_sqlflow_xml


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'atlas_bridge' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
