"""Gudu SQLFlow's file formats: the reader (:mod:`.read`) and the writer (:mod:`.write`) side by side.

They share the format's vocabulary (dbobjs / relationships, column ids, effect types), so a change to one is
checked against the other by the round-trip tests.
"""

from __future__ import annotations

from atlas_bridge.sqlflow.read import extract_sqlflow_lineage
from atlas_bridge.sqlflow.write import to_sqlflow_json, to_sqlflow_xml

__all__ = ["extract_sqlflow_lineage", "to_sqlflow_json", "to_sqlflow_xml"]
