"""OpenLineage in and out: run events read into the lineage model, the model written as run events.

Pure mapping lives here (no I/O); the ``serve`` command and the sinks do the I/O.
"""
