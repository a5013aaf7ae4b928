"""Extractors turn inputs (SQL text, Spark plans, SQLFlow exports) into the lineage model.

Every extractor is a pure function: no I/O beyond its argument, no settings captured, and it returns an
:class:`atlas_bridge.model.ExtractionResult` instead of raising on bad input.
"""
