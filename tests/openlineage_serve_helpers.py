"""A real ``atlas-bridge serve`` process on 127.0.0.1, and OpenLineage events made with OpenLineage's own
Python client (shared by the serve tests and benchmarks/openlineage_serve.py)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_READY = re.compile(r"serving OpenLineage at (http://[0-9.]+:\d+)/api/v1/lineage")


def fast_env(atlas_url: str | None, out: Path, **extra: str) -> dict[str, str]:
    """The environment of a serve process that gives up on a dead Atlas in a second or two."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_BRIDGE_", "OPENLINEAGE_"))}
    env.pop("ATLAS_CONF", None)
    env.update(
        {
            "ATLAS_BRIDGE_OUTPUT_DIR": str(out),
            "ATLAS_BRIDGE_NAMESPACE": "ol",
            "ATLAS_BRIDGE_RETRIES": "1",
            "ATLAS_BRIDGE_BACKOFF_S": "0",
            "ATLAS_BRIDGE_CONNECT_TIMEOUT_S": "1",
            "ATLAS_BRIDGE_READ_TIMEOUT_S": "3",
            "ATLAS_BRIDGE_GIVE_UP_AFTER_S": "3",
            "ATLAS_BRIDGE_SERVE_RETRY_INTERVAL_S": "0.3",
            "ATLAS_BRIDGE_SERVE_FSYNC": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if atlas_url is not None:
        env["ATLAS_BRIDGE_REST_ADDRESS"] = atlas_url
    env.update(extra)
    return env


class ServeProcess:
    """``atlas-bridge serve --port 0`` in a child process; ``url`` once it listens."""

    def __init__(
        self, env: dict[str, str], *args: str, cwd: Path | None = None, timeout_s: float = 30.0
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "atlas_bridge", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd or ROOT),
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr, False), daemon=True).start()
        self.url = self._wait_ready(timeout_s)

    def _pump(self, stream: Any, into: list[str], signal_lines: bool) -> None:
        for line in stream:
            into.append(line)
            if signal_lines:
                self.lines.put(line)
        if signal_lines:
            self.lines.put(None)

    def _wait_ready(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            m = _READY.search(line)
            if m:
                return m.group(1)
        self.kill()
        msg = f"serve did not start: {''.join(self.stdout)}{''.join(self.stderr)[-3000:]}"
        raise AssertionError(msg)

    @property
    def lineage_url(self) -> str:
        return self.url + "/api/v1/lineage"

    def terminate(self, timeout_s: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> None:
    """Poll ``check`` until true; an AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval_s)
    if not check():
        msg = f"timed out after {timeout_s:g}s waiting for {what}"
        raise AssertionError(msg)


def run_events(
    index: int,
    *,
    namespace: str = "hive://metastore.example:9083",
    producer: str = "https://example.test/ol",
    jobs: int | None = None,
) -> list[Any]:
    """START and COMPLETE of one run of a job reading one table into another, with the schema,
    columnLineage and sql facets (OpenLineage's client classes, so the events are what clients send).

    ``jobs``: runs share that many jobs (and their tables), as a site's scheduled jobs run again and again.
    """
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import column_lineage_dataset, schema_dataset, sql_job

    run_id = str(uuid.UUID(int=0x0199_0000_0000_7000_8000_0000_0000_0000 + index))
    job_index = index if jobs is None else index % jobs
    src = f"sales.orders_{job_index}"
    dst = f"mart.order_totals_{job_index}"
    fields = [
        schema_dataset.SchemaDatasetFacetFields(name="customer_id", type="bigint"),
        schema_dataset.SchemaDatasetFacetFields(name="amount", type="decimal(10,2)"),
    ]
    out_fields = [
        schema_dataset.SchemaDatasetFacetFields(name="customer_id", type="bigint"),
        schema_dataset.SchemaDatasetFacetFields(name="total", type="decimal(18,2)"),
    ]

    def field(name: str, kind: str, subtype: str) -> column_lineage_dataset.Fields:
        return column_lineage_dataset.Fields(
            inputFields=[
                column_lineage_dataset.InputField(
                    namespace=namespace,
                    name=src,
                    field=name,
                    transformations=[column_lineage_dataset.Transformation(type=kind, subtype=subtype)],
                )
            ]
        )

    lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "customer_id": field("customer_id", "DIRECT", "IDENTITY"),
            "total": field("amount", "DIRECT", "AGGREGATION"),
        }
    )
    sql = f"INSERT INTO {dst} SELECT customer_id, SUM(amount) AS total FROM {src} GROUP BY customer_id"
    job = Job(
        namespace="etl", name=f"order_totals_{job_index}", facets={"sql": sql_job.SQLJobFacet(query=sql)}
    )
    inputs = [
        InputDataset(
            namespace=namespace, name=src, facets={"schema": schema_dataset.SchemaDatasetFacet(fields=fields)}
        )
    ]
    outputs = [
        OutputDataset(
            namespace=namespace,
            name=dst,
            facets={"schema": schema_dataset.SchemaDatasetFacet(fields=out_fields), "columnLineage": lineage},
        )
    ]
    t0 = f"2026-11-27T10:{index % 60:02d}:00.000Z"
    t1 = f"2026-11-27T10:{index % 60:02d}:30.000Z"
    return [
        RunEvent(
            eventType=RunState.START,
            eventTime=t0,
            run=Run(runId=run_id),
            job=job,
            producer=producer,
            inputs=inputs,
            outputs=outputs,
        ),
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=t1,
            run=Run(runId=run_id),
            job=job,
            producer=producer,
            inputs=inputs,
            outputs=outputs,
        ),
    ]


def ol_client(
    url: str, *, compression: str | None = None, api_key: str | None = None, retries: int = 0
) -> Any:
    """OpenLineage's own client with its HTTP transport, pointed at ``url`` (no retries unless asked:
    a test must see each answer)."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    config: dict[str, Any] = {
        "url": url,
        "timeout": 10.0,
        "retry": {"total": retries, "read": retries, "connect": retries},
    }
    if compression:
        config["compression"] = compression
    if api_key:
        config["auth"] = {"type": "api_key", "apiKey": api_key}
    return OpenLineageClient(transport=HttpTransport(HttpConfig.from_dict(config)))


def atlas_entities(stub: Any) -> Counter[tuple[str, str]]:
    """(typeName, qualifiedName) of every active entity of ours in the stub."""
    return Counter(
        (e["typeName"], e["attributes"]["qualifiedName"])
        for e in stub.active_entities()
        if str(e["typeName"]).startswith("atlas_bridge")
    )


def expected_entities(events: list[Any], namespace: str = "ol") -> set[tuple[str, str]]:
    """What converting ``events`` directly gives: the entities Atlas must hold after serve."""
    import json

    from openlineage.client.serde import Serde

    from atlas_bridge.config import Settings
    from atlas_bridge.openlineage.serve import ServeOptions, default_converter

    convert = default_converter(Settings(namespace=namespace), ServeOptions())
    batches = convert([json.loads(Serde.to_json(e)) for e in events]).batches
    return {(e["typeName"], e["attributes"]["qualifiedName"]) for b in batches for e in b["entities"]}
