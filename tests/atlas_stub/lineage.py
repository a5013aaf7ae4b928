"""Lineage (§5): traversal over Process inputs/outputs, as the UI's Lineage tab asks for it."""

from __future__ import annotations

from typing import Any

from atlas_stub.common import _LINEAGE_RELATIONSHIPS, AtlasHTTPError, _relation


class LineageGraph:
    """Mixin of :class:`atlas_stub.AtlasStub`; the state it uses is set up there."""

    def _get_lineage_by_attr(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        type_name = path.split("/")[4]
        stored = self._lookup_unique(type_name, params)
        return self._lineage(stored["guid"], params)

    def _get_lineage(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        guid = path.split("/")[2]
        if guid not in self.entities:
            raise AtlasHTTPError(404, "ATLAS-404-00-005", f"Given instance guid {guid} is invalid/not found")
        return self._lineage(guid, params)

    def _lineage(self, guid: str, params: dict[str, list[str]]) -> dict[str, Any]:
        direction = (params.get("direction") or ["BOTH"])[0]
        if direction not in ("INPUT", "OUTPUT", "BOTH"):
            raise AtlasHTTPError(404, None, "", raw="There was an error processing your request.")
        try:
            depth = int((params.get("depth") or ["3"])[0])
        except ValueError as e:
            raise AtlasHTTPError(404, None, "", raw="There was an error processing your request.") from e
        ent = self.entities[guid]
        is_process = self._is_a(ent["typeName"], "Process")
        if not is_process and not self._is_a(ent["typeName"], "DataSet"):
            raise AtlasHTTPError(
                404, "ATLAS-404-00-011", f"{guid}: lineage not supported for type {ent['typeName']}"
            )
        relations: dict[str, dict[str, str]] = {}
        nodes: set[str] = {guid}
        for d in ["INPUT", "OUTPUT"] if direction == "BOTH" else [direction]:
            if is_process:
                self._walk_process(guid, d, depth, relations, nodes, set())
            else:
                self._walk_dataset(guid, d, depth, relations, nodes, set())
        return {
            "baseEntityGuid": guid,
            "lineageDirection": direction,
            "lineageDepth": depth,
            # shared/atlas-ui/README.md: each header carries the lists Atlas always sends (meanings too)
            "guidEntityMap": {g: {**self._header(g), "meanings": []} for g in sorted(nodes)},
            "relations": list(relations.values()),
            "relationsOnDemand": {},
        }

    def _lineage_edges(self, guid: str, label: str, end: int) -> list[tuple[str, str]]:
        """(other guid, edge guid) of lineage edges ``label`` (inputs/outputs) where ``guid`` sits on ``end``.

        The traversal does not filter edge or vertex state (§2.6, §9).
        """
        out = []
        for edge_guid in sorted(self._edges_by_entity.get(guid, ())):
            edge = self.edges[edge_guid]
            if _LINEAGE_RELATIONSHIPS.get(edge["typeName"]) == label and edge[f"end{end}"] == guid:
                out.append((edge[f"end{3 - end}"], edge_guid))
        return out

    def _walk_dataset(
        self,
        guid: str,
        direction: str,
        depth: int,
        relations: dict[str, dict[str, str]],
        nodes: set[str],
        seen: set[str],
    ) -> None:
        if guid in seen:
            return
        seen.add(guid)
        # INPUT: processes that output this dataset (end1 = process, end2 = dataset).
        label = "outputs" if direction == "INPUT" else "inputs"
        onward = "inputs" if direction == "INPUT" else "outputs"
        for process, edge_guid in self._lineage_edges(guid, label, 2):
            if not self._lineage_edges(process, onward, 1):
                continue  # §9: a process with no inputs (or no outputs) appears in no dataset's lineage
            nodes.add(process)
            relations[edge_guid] = (
                _relation(process, guid, edge_guid)
                if direction == "INPUT"
                else _relation(guid, process, edge_guid)
            )
            self._walk_process(process, direction, depth, relations, nodes, seen)

    def _walk_process(
        self,
        guid: str,
        direction: str,
        depth: int,
        relations: dict[str, dict[str, str]],
        nodes: set[str],
        seen: set[str],
    ) -> None:
        if guid in seen:
            return
        seen.add(guid)
        label = "inputs" if direction == "INPUT" else "outputs"
        for dataset, edge_guid in self._lineage_edges(guid, label, 1):
            nodes.add(dataset)
            relations[edge_guid] = (
                _relation(dataset, guid, edge_guid)
                if direction == "INPUT"
                else _relation(guid, dataset, edge_guid)
            )
            if depth != 1:
                self._walk_dataset(dataset, direction, depth - 1 if depth > 0 else 0, relations, nodes, seen)
