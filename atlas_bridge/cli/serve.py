"""``atlas-bridge serve``: OpenLineage's HTTP API, delivering to Atlas (see atlas_bridge.openlineage.serve).

Each option is resolved like the Atlas settings: the command line, then ``ATLAS_BRIDGE_SERVE_<NAME>``,
then ``atlas.hook.atlas_bridge.serve.<name>`` in atlas-application.properties, then the default. The API
key is never an option (it would show in ``ps``): ``ATLAS_BRIDGE_SERVE_API_KEY``, the property
``atlas.hook.atlas_bridge.serve.apiKey``, or ``--api-key-file``; several keys, comma-separated, are all
accepted (rotation).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from atlas_bridge.cli.atlas import atlas_options, load_settings
from atlas_bridge.errors import ConfigError

logger = logging.getLogger(__name__)

_PROPERTY_PREFIX = "atlas.hook.atlas_bridge.serve."

# ServeOptions field -> (property name after the prefix, type)
_FIELDS: dict[str, tuple[str, type]] = {
    "host": ("host", str),
    "port": ("port", int),
    "max_body_bytes": ("maxBodyBytes", int),
    "threads": ("threads", int),
    "max_connections": ("maxConnections", int),
    "batch_size": ("batchSize", int),
    "max_group_events": ("maxGroupEvents", int),
    "retry_interval_s": ("retryIntervalSecs", float),
    "drain_timeout_s": ("drainTimeoutSecs", float),
    "keep_timeout_s": ("keepTimeoutSecs", float),
    "fsync": ("fsync", bool),
}


def _parse(name: str, kind: type, text: str) -> Any:
    text = text.strip()
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        value = kind(text)
    except ValueError:
        msg = f"serve option {name}: not a valid {kind.__name__}"
        raise ConfigError(msg) from None
    if kind in (int, float) and value <= 0 and name != "port":
        msg = f"serve option {name} must be above 0"
        raise ConfigError(msg)
    return value


def serve_options(properties: dict[str, str], given: dict[str, Any], api_key_file: Path | None) -> Any:
    """:class:`ServeOptions` from the command line over the environment over the properties file."""
    from atlas_bridge.openlineage.serve import ServeOptions

    values: dict[str, Any] = {}
    for field, (prop, kind) in _FIELDS.items():
        if given.get(field) is not None:
            values[field] = given[field]
            continue
        env = os.environ.get(f"ATLAS_BRIDGE_SERVE_{field.upper()}")
        text = env if env is not None else properties.get(_PROPERTY_PREFIX + prop)
        if text is not None and text.strip():
            values[field] = _parse(field, kind, text)
    keys_text = (
        os.environ.get("ATLAS_BRIDGE_SERVE_API_KEY") or properties.get(_PROPERTY_PREFIX + "apiKey") or ""
    )
    if api_key_file is not None:
        try:
            keys_text = api_key_file.read_text(encoding="utf-8")
        except OSError as e:
            msg = f"cannot read the API key file {api_key_file}: {e.strerror or e}"
            raise ConfigError(msg) from None
    keys = tuple(k.strip() for k in keys_text.replace("\n", ",").split(",") if k.strip())
    if keys:
        values["api_keys"] = keys
    options = ServeOptions(**values)
    if not 0 <= options.port <= 65535:
        msg = f"serve option port must be 0-65535, not {options.port}"
        raise ConfigError(msg)
    return options


@click.command("serve")
@atlas_options
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1; 0.0.0.0 for every one).")
@click.option("--port", type=int, default=None, help="Port (default 5000, as Marquez; 0 picks a free one).")
@click.option(
    "--api-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File of accepted API keys (one a line); clients send 'Authorization: Bearer <key>'. "
    "Or ATLAS_BRIDGE_SERVE_API_KEY. Default: no key needed.",
)
@click.option(
    "--max-body-bytes", type=int, default=None, help="Largest request body, also once decompressed."
)
@click.option("--threads", type=int, default=None, help="Requests handled at once (default 8).")
@click.option("--max-connections", type=int, default=None, help="Open connections at most (default 100).")
@click.option("--batch-size", type=int, default=None, help="Most entities per Atlas request (default 1000).")
@click.option(
    "--retry-interval",
    "retry_interval_s",
    type=float,
    default=None,
    help="Seconds between tries while Atlas is down (default 30).",
)
@click.option(
    "--drain-timeout",
    "drain_timeout_s",
    type=float,
    default=None,
    help="On SIGTERM, seconds to finish what is in flight (default 20).",
)
@click.option(
    "--namespace", default=None, help="Atlas metadata namespace of qualifiedNames (default: from the config)."
)
@click.option(
    "--out",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="output_dir: the spool is <out>/spool (default atlas-bridge-out).",
)
@click.option(
    "--to",
    "to",
    type=click.Choice(["auto", "atlas", "kafka", "files"]),
    default="auto",
    show_default=True,
    help="Where events go: Atlas's REST API, Atlas's Kafka hook topic, or only files in --out (auto: Kafka "
    "when bootstrap servers are set, else Atlas when an address is, else files).",
)
def serve_command(
    atlas_url: str | None,
    config_file: Path | None,
    user: str | None,
    host: str | None,
    port: int | None,
    api_key_file: Path | None,
    max_body_bytes: int | None,
    threads: int | None,
    max_connections: int | None,
    batch_size: int | None,
    retry_interval_s: float | None,
    drain_timeout_s: float | None,
    namespace: str | None,
    output_dir: Path | None,
    to: str,
) -> None:
    """Take OpenLineage run events over HTTP (POST /api/v1/lineage) and deliver them to Atlas.

    An event is acknowledged once it is kept: converted and written to the spool, which is sent to Atlas
    in order and kept while Atlas is down (`atlas-bridge push <out>/spool` sends it too). SIGTERM finishes
    the requests in flight and the batch being sent, and keeps the rest. GET /health and /ready answer
    for probes.
    """
    from atlas_bridge.config import find_properties_file, read_properties
    from atlas_bridge.openlineage.serve import build_server, run_server

    overrides: dict[str, Any] = {"namespace": namespace, "output_dir": output_dir}
    if to == "atlas":
        overrides["delivery"] = "rest"
    elif to == "kafka":
        overrides["delivery"] = "kafka"
    settings = load_settings(config_file, atlas_url, user, **overrides)
    if to == "files":
        settings = settings.model_copy(
            update={"rest_address": [], "kafka_bootstrap_servers": [], "delivery": "auto"}
        )
    if to == "atlas" and not settings.atlas_configured:
        msg = (
            "--to atlas needs an Atlas address: --atlas URL, ATLAS_BRIDGE_REST_ADDRESS or atlas.rest.address"
        )
        raise click.UsageError(msg)
    if to == "kafka" and not settings.kafka_configured:
        msg = "--to kafka needs atlas.kafka.bootstrap.servers (or ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS)"
        raise click.UsageError(msg)
    given = {
        "host": host,
        "port": port,
        "max_body_bytes": max_body_bytes,
        "threads": threads,
        "max_connections": max_connections,
        "batch_size": batch_size,
        "retry_interval_s": retry_interval_s,
        "drain_timeout_s": drain_timeout_s,
    }
    try:
        path = find_properties_file(config_file)
        properties = read_properties(path) if path is not None else {}
        options = serve_options(properties, given, api_key_file)
        server = build_server(settings, options)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    except OSError as e:  # the port is taken, the address is not ours...
        msg = f"cannot listen on {options.host}:{options.port}: {e.strerror or e}"
        raise click.UsageError(msg) from e
    except ImportError as e:
        msg = f"serve needs the 'serve' extra (pip install 'atlas-bridge[serve]'): {e}"
        raise click.UsageError(msg) from e

    def ready(srv: Any) -> None:
        where = {"rest": "Atlas " + ", ".join(settings.base_urls), "kafka": "Kafka", "files": "files only"}
        click.echo(
            f"serving OpenLineage at {srv.url}/api/v1/lineage -> {where[srv.app.delivery]};"
            f" kept in {srv.keeper.folder}" + (" (API key required)" if options.api_keys else ""),
        )
        sys.stdout.flush()

    run_server(server, ready=ready)
    kept = server.keeper.events_kept
    pending = server.sender.pending() if server.sender is not None else 0
    line = f"stopped: {kept} event(s) kept"
    if pending > 0:
        folder = server.keeper.folder
        line += f"; {pending} batch(es) wait in {folder} (sent at the next start, or `atlas-bridge push`)"
    click.echo(line)


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(serve_command)
