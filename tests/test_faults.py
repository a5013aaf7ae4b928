"""Delivery under faults, against a real HTTP server on 127.0.0.1 (``atlas_stub.http``), not a mock.

Each fault of the delivery issue has a test here: nothing lost (every batch Atlas did not acknowledge is
kept and replayable), nothing hung (every wait is bounded), nothing leaked (no secret in any output).
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import logging
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

import pytest
from atlas_stub.http import ECHOES, Fault, FaultServer
from click.testing import CliRunner

from atlas_bridge.atlas.client import AtlasClient, RetryPolicy, scrub
from atlas_bridge.atlas.sink import AtlasSink, FileSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.cli import cli
from atlas_bridge.config import Settings
from atlas_bridge.errors import AtlasAuthError, AtlasError, AtlasUnavailableError, ConfigError

WAREHOUSE = Path(__file__).resolve().parent.parent / "examples" / "warehouse"
NS = "faults"
CANARY = "Cnry-7f3/Pw"  # a '/' on purpose: it once turned into a "port" in a traceback


def _table(qn: str, guid: str = "-1") -> dict[str, Any]:
    return {"typeName": "DataSet", "guid": guid, "attributes": {"qualifiedName": qn, "name": qn}}


def _fast(url: str, **kwargs: Any) -> AtlasClient:
    policy = RetryPolicy(
        deadline_s=kwargs.pop("deadline_s", 5.0), give_up_after_s=kwargs.pop("give_up_after_s", 10.0)
    )
    kwargs.setdefault("retries", 3)
    return AtlasClient(url, backoff=0, policy=policy, timeout=kwargs.pop("timeout", (1.0, 2.0)), **kwargs)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fast_env(monkeypatch: pytest.MonkeyPatch, url: str, **extra: str) -> None:
    monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", url)
    monkeypatch.setenv("ATLAS_BRIDGE_BACKOFF_S", "0")
    monkeypatch.setenv("ATLAS_BRIDGE_RETRIES", extra.pop("retries", "2"))
    monkeypatch.setenv("ATLAS_BRIDGE_CONNECT_TIMEOUT_S", "1")
    monkeypatch.setenv("ATLAS_BRIDGE_READ_TIMEOUT_S", "2")
    monkeypatch.setenv("ATLAS_BRIDGE_GIVE_UP_AFTER_S", extra.pop("give_up", "5"))
    for k, v in extra.items():
        monkeypatch.setenv(f"ATLAS_BRIDGE_{k.upper()}", v)


def _payload_entities(folder: Path) -> Counter[tuple[str, str]]:
    """(typeName, qualifiedName) of every entity in a folder of request bodies."""
    out: Counter[tuple[str, str]] = Counter()
    for path in sorted(folder.glob("*-entities.json")):
        batch = json.loads(path.read_text(encoding="utf-8"))
        for e in [*batch["entities"], *batch.get("referredEntities", {}).values()]:
            out[(e["typeName"], e["attributes"]["qualifiedName"])] += 1
    return out


def _atlas_entities(srv: FaultServer) -> Counter[tuple[str, str]]:
    return Counter(
        (e["typeName"], e["attributes"]["qualifiedName"])
        for e in srv.stub.active_entities()
        if e["typeName"].startswith("atlas_bridge") or e["typeName"] in ("DataSet", "Process")
    )


def _assert_complete(srv: FaultServer, clean: Counter[tuple[str, str]]) -> None:
    """Atlas holds exactly the clean run's entities: none lost, none twice."""
    got = _atlas_entities(srv)
    assert set(got) == set(clean), (sorted(set(clean) - set(got))[:5], sorted(set(got) - set(clean))[:5])
    assert max(got.values()) == 1


# -- the client ------------------------------------------------------------------------------------


def test_a_trickling_server_is_cut_at_the_request_deadline() -> None:
    with FaultServer() as srv:
        srv.add(Fault("trickle", times=None, interval_s=0.2))
        client = _fast(srv.url, retries=1, deadline_s=0.6, timeout=(1.0, 5.0))
        with pytest.raises(AtlasUnavailableError, match=r"did not answer .* within .*deadline") as info:
            client.get_typedef_headers()
    assert info.value.attempts == 2


def test_a_silent_server_is_given_up_on_in_bounded_time() -> None:
    with FaultServer() as srv:
        srv.add(Fault("silent", times=None))
        client = _fast(srv.url, retries=50, timeout=(1.0, 0.3), give_up_after_s=1.0)
        with pytest.raises(AtlasUnavailableError, match=r"gave up after \d+s, give_up_after_s=1") as info:
            client.get_typedef_headers()
    assert 1 < info.value.attempts < 10
    assert info.value.elapsed_s >= 1.0


@pytest.mark.parametrize("kind", ["truncate", "reset", "applied_status", "status"])
def test_transport_faults_are_retried_and_applied_once(kind: str) -> None:
    with FaultServer() as srv:
        srv.add(Fault(kind, path_contains="/entity/bulk", times=2))
        client = _fast(srv.url)
        response = client.post_entities({"entities": [_table("db.t@p")], "referredEntities": {}})
        assert [o for m, p, o in srv.log if p.endswith("/entity/bulk")] == [kind, kind, "ok"]
        assert response["guidAssignments"]
        assert [e["attributes"]["qualifiedName"] for e in srv.stub.active_entities("DataSet")] == ["db.t@p"]


def test_retry_after_is_capped_on_a_real_server() -> None:
    with FaultServer() as srv:
        srv.add(Fault("status", status=429, headers={"Retry-After": "3600"}, times=1))
        client = _fast(srv.url)
        client.policy = RetryPolicy(retries=3, backoff_s=0, retry_after_cap_s=0.05)
        waits: list[float] = []
        client._sleep = waits.append
        assert client.get_typedef_headers()
    assert waits == [0.05]


def test_atlas_sink_spools_a_batch_whose_answer_is_cut_off(tmp_path: Path) -> None:
    with FaultServer() as srv:
        srv.add(Fault("truncate", path_contains="/entity/bulk", times=None))
        sink = AtlasSink(_fast(srv.url, retries=1), spool_dir=tmp_path / "spool")
        sink.emit({"entities": [_table("db.t@p")], "referredEntities": {}})
        assert sink.report.spooled == 1
        assert sink.spool_pending() == 1
        srv.clear()
        sink.flush_spool()  # an explicit flush always tries; close() right after a failure does not
        assert sink.spool_pending() == 0
        assert len(srv.stub.active_entities("DataSet")) == 1


def test_atlas_sink_leaves_a_failing_atlas_alone_for_a_while(tmp_path: Path) -> None:
    """After Atlas failed to answer, later batches go to the spool at once: no wait per batch."""
    with FaultServer() as srv:
        srv.add(Fault("status", status=503, times=None))
        sink = AtlasSink(_fast(srv.url, retries=2), spool_dir=tmp_path / "spool", retry_interval_s=300)
        for i in range(5):
            sink.emit({"entities": [_table(f"db.t{i}@p")], "referredEntities": {}})
        sink.close()
        assert len(srv.log) == 3  # one call and its two retries; then nothing for retry_interval_s
        assert sink.report.spooled == 5
        assert sink.spool_pending() == 5


def test_a_refused_login_is_not_retried_batch_after_batch(tmp_path: Path) -> None:
    with FaultServer() as srv:
        srv.stub.require_auth("alice", "right")
        sink = AtlasSink(_fast(srv.url, username="alice", password="wrong"), spool_dir=tmp_path / "spool")
        for i in range(5):
            sink.emit({"entities": [_table(f"db.t{i}@p")], "referredEntities": {}})
        assert sink.report.spooled == 5
        assert len(srv.log) == 1  # one refused login, then nothing more
        assert isinstance(sink.refused, AtlasAuthError)


def test_typedef_registration_converges_when_atlas_applied_a_post_but_answered_500() -> None:
    with FaultServer() as srv:
        srv.add(Fault("applied_status", status=500, method="POST", path_contains="/types/typedefs"))
        client = _fast(srv.url)
        register_typedefs(client)
        outcomes = [(m, o) for m, p, o in srv.log if p.endswith("/types/typedefs")]
        assert ("POST", "applied_status") in outcomes
        assert srv.stub.typedefs.get("atlas_bridge_process") is not None
        assert not register_typedefs(client).has_changes


# -- TLS ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_settings_win_over_requests_ca_bundle(
    self_signed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import certifi

    cert, key = self_signed
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi.where())  # a bundle without our certificate
    monkeypatch.setenv("CURL_CA_BUNDLE", certifi.where())
    with FaultServer(tls=ctx) as srv:
        assert AtlasClient.from_settings(
            Settings(rest_address=[srv.url], ca_bundle=cert)
        ).get_typedef_headers()
        assert AtlasClient.from_settings(
            Settings(rest_address=[srv.url], verify_tls=False)
        ).get_typedef_headers()
        strict = Settings(rest_address=[srv.url], retries=0)
        with pytest.raises(AtlasUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
            AtlasClient.from_settings(strict).get_typedef_headers()


def test_without_tls_verification_the_warning_is_said_once(
    self_signed: tuple[Path, Path], tmp_path: Path
) -> None:
    """urllib3 warned on every request (InsecureRequestWarning): a push of 30 batches printed 30+."""
    cert, key = self_signed
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    folder = tmp_path / "batches"
    sink = FileSink(folder)
    for i in range(30):
        sink.emit({"entities": [_table(f"db.t{i}@p")], "referredEntities": {}})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_BRIDGE_", "PYTHONWARNINGS"))}
    with FaultServer(tls=ctx) as srv:
        env.update(ATLAS_BRIDGE_REST_ADDRESS=srv.url, ATLAS_BRIDGE_VERIFY_TLS="false")
        done = subprocess.run(
            [sys.executable, "-m", "atlas_bridge", "push", str(folder)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        requests_made = len(srv.log)
    assert done.returncode == 0, done.stderr
    assert requests_made > 30
    assert done.stderr.count("InsecureRequestWarning") == 0
    said = [line for line in done.stderr.splitlines() if "not verified" in line]
    assert len(said) == 1, done.stderr
    assert f"Atlas at {srv.url}" in said[0]
    assert "verify_tls" in said[0]


# -- secrets ----------------------------------------------------------------------------------------


def _leaks(text: str, user: str = "admin") -> list[str]:
    forms = [CANARY, base64.b64encode(f"{user}:{CANARY}".encode()).decode(), CANARY.replace("/", "%2F")]
    return [f for f in forms if f in text]


def test_an_echoed_authorization_header_never_reaches_any_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    folder = tmp_path / "batches"
    FileSink(folder).emit({"entities": [_table("db.t@p")], "referredEntities": {}})
    with FaultServer() as srv:
        srv.add(Fault("echo_auth", times=None))
        _fast_env(monkeypatch, srv.url, retries="1", username="admin", password=CANARY)
        result = CliRunner().invoke(cli, ["push", str(folder)])
    assert result.exit_code == 1
    assert "Authorization: ***" in result.output
    everything = (
        result.output + caplog.text + "".join(p.read_text() for p in folder.rglob("*") if p.is_file())
    )
    assert _leaks(everything) == []


ECHO_USER = "admin"
ECHO_PASSWORD = 'Cnry 7f3/Pw+x?"<'
"""Each of ' ', '/', '+', '?', '"' and '<' reads differently in one of the encodings of :data:`ECHOES`."""


def _decodings(text: str) -> list[str]:
    """The text as it reads once each encoding a server may apply is undone (the leak check's view)."""
    json_text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    out = [text, unquote(text), unquote_plus(text), html.unescape(text)]
    out.append(json_text.replace("\\/", "/").replace('\\"', '"'))
    for token in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            with contextlib.suppress(ValueError):
                out.append(decode(token + "=" * (-len(token) % 4)).decode("utf-8", "replace"))
    for token in re.findall(r"[0-9a-fA-F]{8,}", text):
        out.append(bytes.fromhex(token[: len(token) // 2 * 2]).decode("utf-8", "replace"))
    return out


def _echo_leaks(text: str) -> list[str]:
    """Pieces of ECHO_PASSWORD that show in the text, however encoded."""
    decoded = _decodings(text)
    return [piece for piece in ("Cnry", "7f3/Pw", "Pw+x") if any(piece in d for d in decoded)]


def test_the_leak_check_sees_every_echo() -> None:
    for name, echo in ECHOES.items():
        assert _echo_leaks(echo(ECHO_USER, ECHO_PASSWORD)), name


@pytest.mark.parametrize("echo", sorted(ECHOES))
def test_credentials_a_server_echoes_in_any_encoding_reach_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, echo: str
) -> None:
    """A proxy or Atlas quoting our credentials back, percent-, form-, base64-, hex-, JSON- or HTML-encoded:
    none of it in the command's output, the logs, the exception, nor any file written."""
    caplog.set_level(logging.DEBUG)
    folder = tmp_path / "batches"
    FileSink(folder).emit({"entities": [_table("db.t@p")], "referredEntities": {}})
    with FaultServer() as srv:
        srv.add(Fault("echo_auth", echo=echo, times=None))
        _fast_env(monkeypatch, srv.url, retries="0", username=ECHO_USER, password=ECHO_PASSWORD)
        result = CliRunner().invoke(cli, ["push", str(folder)])
        client = _fast(srv.url, username=ECHO_USER, password=ECHO_PASSWORD, retries=0)
        with pytest.raises(AtlasUnavailableError) as info:
            client.get_typedef_headers()
        sink = AtlasSink(client, spool_dir=tmp_path / "spool")
        sink.emit({"entities": [_table("db.t@p")], "referredEntities": {}})
        assert srv.log
        assert {outcome for _, _, outcome in srv.log} == {"echo_auth"}
    assert result.exit_code == 1, result.output
    assert "Atlas answered" in result.output  # the server's answer is still told, without the secrets
    error = info.value
    files = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    everything = [result.output, caplog.text, str(error), repr(error), error.body or "", files]
    assert _echo_leaks("\n".join(everything)) == []


def _body_excerpt(body: str, password: str) -> AtlasError:
    """The error a client gets for a 400 with this body (its ``body`` is the scrubbed excerpt)."""
    with FaultServer() as srv:
        srv.add(Fault("status", status=400, body=body, times=None))
        client = _fast(srv.url, username=ECHO_USER, password=password, retries=0)
        with pytest.raises(AtlasError) as info:
            client.get_typedef_headers()
    return info.value


def test_a_long_body_costs_no_more_to_scrub_than_its_start() -> None:
    """Scrubbing every form takes up to a second a megabyte: a 9 MB error page is scrubbed only as far as
    the excerpt needs."""
    echo = ECHOES["form_lower"](ECHO_USER, ECHO_PASSWORD)
    body = echo + " " + "<p>Proxy Error: the server could not handle the request</p>\n" * 150_000
    started = time.process_time()
    error = _body_excerpt(body, ECHO_PASSWORD)
    assert time.process_time() - started < 1.0  # 0.1 s; 3 s when the whole body was scrubbed
    assert error.body is not None
    assert "Proxy Error" in error.body
    assert _echo_leaks(str(error) + error.body) == []


def test_no_piece_of_a_secret_cut_by_the_scrubbed_window_shows() -> None:
    """A body of nothing but (long) echoes: scrubbing shrinks the window below the excerpt, and the echo
    the window cut in two would come next, unscrubbed."""
    password = "Cnry-" + "7f3/Pw+x" * 5
    echo = "".join("\\" * 8 + f"u{ord(c):04x}" for c in f"{ECHO_USER}:{password}")  # JSON in JSON in...
    error = _body_excerpt(echo * 200, password)
    assert error.body is not None
    assert error.body.startswith("***")
    unescaped = re.sub(r"\\+u([0-9a-f]{4})", lambda m: chr(int(m.group(1), 16)), str(error) + error.body)
    assert "Cnry" not in unescaped
    assert "admin:" not in unescaped


def test_a_redirect_to_a_url_holding_the_credentials_is_told_without_them(tmp_path: Path) -> None:
    with FaultServer() as srv:
        target = (
            f"http://127.0.0.1:{_closed_port()}/sso/{ECHOES['percent_lower'](ECHO_USER, ECHO_PASSWORD)}/x"
        )
        srv.add(Fault("status", status=302, headers={"Location": target}, times=None))
        client = _fast(srv.url, username=ECHO_USER, password=ECHO_PASSWORD, retries=0)
        with pytest.raises(AtlasError) as info:
            client.get_typedef_headers()
    assert "redirected GET" in str(info.value)
    assert "/sso/" in str(info.value)
    assert _echo_leaks(str(info.value)) == []


def test_scrub_takes_credentials_out_of_text_from_elsewhere() -> None:
    b64 = base64.b64encode(f"admin:{CANARY}".encode()).decode()
    text = f"Authorization: Basic {b64} url=http://admin:{CANARY}@h:1/x token {CANARY} Bearer abc.def"
    cleaned = scrub(text, "admin", CANARY)
    assert _leaks(cleaned) == []
    assert "abc.def" not in cleaned
    # A short password is taken out as a whole token only: blanking every 'e' would reveal it.
    assert scrub("HTTPConnectionPool e", "u", "e") == "HTTPConnectionPool ***"


@pytest.mark.parametrize(
    "address",
    [
        "http://127.0.0.1:notaport",
        "http://[::1:21000",
        "http://127.0.0.1:99999",
    ],
)
def test_bad_addresses_are_usage_errors_without_secrets(tmp_path: Path, address: str) -> None:
    folder = tmp_path / "b"
    FileSink(folder).emit({"entities": [_table("db.t@p")], "referredEntities": {}})
    result = CliRunner().invoke(cli, ["push", str(folder), "--atlas", address])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert _leaks(result.output) == []


def test_a_password_with_a_slash_in_the_address_is_taken_as_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It once read as a port ("Port could not be cast to integer value as '<password>'")."""
    folder = tmp_path / "b"
    FileSink(folder).emit({"entities": [_table("db.t@p")], "referredEntities": {}})
    _fast_env(monkeypatch, "", retries="0")
    address = f"http://admin:{CANARY}@127.0.0.1:{_closed_port()}"
    result = CliRunner().invoke(cli, ["push", str(folder), "--atlas", address])
    assert result.exit_code == 1
    assert "cannot reach Atlas at http://127.0.0.1:" in result.output
    assert "Traceback" not in result.output
    assert _leaks(result.output) == []
    settings = Settings.load(rest_address=address)
    assert settings.password is not None
    assert settings.password.get_secret_value() == CANARY


@pytest.mark.parametrize("source", ["--atlas", "environment", "properties file"])
@pytest.mark.parametrize("delimiter", ["/", "?", "#"])
def test_an_ambiguous_address_is_refused_before_anything_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, delimiter: str
) -> None:
    """``http://admin:Cnry7@<A><delimiter>w0rd-Q@<B>``: password ``Cnry7`` for host A, or
    ``Cnry7@<A><delimiter>w0rd-Q`` for host B? It was split at the first '@' ('/') and A was sent the
    credentials, or silently at the last ('?', '#'). Now a usage error naming no part of it, and neither
    host is asked anything."""
    folder = tmp_path / "b"
    FileSink(folder).emit({"entities": [_table("db.t@p")], "referredEntities": {}})
    _fast_env(monkeypatch, "", retries="0")
    with FaultServer() as first, FaultServer() as second:
        address = f"http://admin:Cnry7@127.0.0.1:{first.port}{delimiter}w0rd-Q@127.0.0.1:{second.port}"
        args = ["push", str(folder)]
        if source == "--atlas":
            args += ["--atlas", address]
        elif source == "environment":
            monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", address)
        else:
            monkeypatch.delenv("ATLAS_BRIDGE_REST_ADDRESS")
            props = tmp_path / "atlas-application.properties"
            props.write_text(f"atlas.rest.address={address}\n", encoding="utf-8")
            args += ["--config", str(props)]
        result = CliRunner().invoke(cli, args)
        assert first.log == []
        assert second.log == []
    assert result.exit_code == 2, result.output
    assert "Atlas address #1 holds '@' and then '/', '?' or '#' before another '@'" in result.output
    assert "Traceback" not in result.output
    for part in ("Cnry7", "w0rd-Q", "admin", str(first.port), str(second.port)):
        assert part not in result.output
    with pytest.raises(ConfigError) as info:  # the client alone refuses it too
        AtlasClient(address)
    assert "Cnry7" not in str(info.value)
    assert "w0rd-Q" not in str(info.value)


def test_credentials_in_a_kafka_bootstrap_server_are_refused_unprinted() -> None:
    """Kafka takes none there, and the servers are printed in every Kafka error."""
    with pytest.raises(ConfigError) as info:
        Settings.load(kafka_bootstrap_servers=f"127.0.0.1:1,admin:{CANARY}@127.0.0.1:{_closed_port()}")
    assert "Kafka bootstrap server #2 holds '@'" in str(info.value)
    assert _leaks(str(info.value)) == []
    assert "admin" not in str(info.value)


def test_a_malformed_setting_never_echoes_its_value() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load(rest_address={"a": f"http://admin:{CANARY}@h:1"})
    assert _leaks(str(info.value)) == []
    assert "input_value" not in str(info.value)


def test_short_password_does_not_garble_messages() -> None:
    client = _fast(f"http://127.0.0.1:{_closed_port()}", username="u", password="e", retries=0)
    with pytest.raises(AtlasUnavailableError) as info:
        client.get_typedef_headers()
    assert "***" not in str(info.value)
    assert "cannot reach Atlas at http://127.0.0.1:" in str(info.value)
    assert "connection refused" in str(info.value)


# -- the output folder -----------------------------------------------------------------------------


def test_a_users_file_in_the_output_folder_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "0002-entities.json").write_text("mine\n", encoding="utf-8")
    (tmp_path / "0099-entities.json").write_text("mine too\n", encoding="utf-8")
    for _ in range(2):  # a second run replaces its own batches only
        sink = FileSink(tmp_path, fresh=True)
        for i in range(3):
            sink.emit({"entities": [_table(f"db.t{i}@p")], "referredEntities": {}})
    assert sink.foreign == ["0002-entities.json", "0099-entities.json"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [b["file"] for b in manifest["batches"]] == [
        "0001-entities.json",
        "0003-entities.json",
        "0004-entities.json",
    ]
    assert (tmp_path / "0002-entities.json").read_text() == "mine\n"
    assert (tmp_path / "0099-entities.json").read_text() == "mine too\n"
    assert not (tmp_path / "0005-entities.json").exists()


# -- whole runs: scan and push ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_run(
    tmp_path_factory: pytest.TempPathFactory, spark: object
) -> tuple[Path, Counter[tuple[str, str]]]:
    """The example warehouse scanned to files: what every faulty run must end up delivering."""
    out = tmp_path_factory.mktemp("clean")
    result = CliRunner().invoke(
        cli, ["scan", str(WAREHOUSE), "--to", str(out), "--namespace", NS, "--batch-size", "40"]
    )
    assert result.exit_code == 0, result.output
    assert f"page:       {out / 'lineage.html'}" in result.output  # the lineage page beside the payloads
    assert "reporting.v_daily_sales" in (out / "lineage.html").read_text(encoding="utf-8")
    return out, _payload_entities(out)


def _scan(out: Path, *extra: str) -> Any:
    args = [
        "scan",
        str(WAREHOUSE),
        "--to",
        "atlas",
        "--out",
        str(out),
        "--namespace",
        NS,
        "--batch-size",
        "40",
    ]
    return CliRunner().invoke(cli, [*args, *extra])


@pytest.mark.spark
def test_scan_with_atlas_unreachable_keeps_every_batch_for_push(
    clean_run: tuple[Path, Counter[tuple[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fast_env(monkeypatch, f"http://127.0.0.1:{_closed_port()}")
    result = _scan(tmp_path)
    assert result.exit_code == 1, result.output
    unsent = tmp_path / "unsent"
    assert _payload_entities(unsent) == clean_run[1]
    assert result.output.strip().splitlines()[-1].endswith(f"finish with: atlas-bridge push {unsent}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["unsent"]["push"] == f"atlas-bridge push {unsent}"
    assert "cannot reach Atlas" in summary["errors"][-1]["message"]
    with FaultServer() as srv:
        monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", srv.url)
        pushed = CliRunner().invoke(cli, ["push", str(unsent)])
        assert pushed.exit_code == 0, pushed.output
        _assert_complete(srv, clean_run[1])


@pytest.mark.spark
def test_scan_with_atlas_failing_midway_keeps_the_rest(
    clean_run: tuple[Path, Counter[tuple[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultServer() as srv:
        srv.add(Fault("status", status=503, method="POST", path_contains="/entity/bulk", after=2, times=None))
        _fast_env(monkeypatch, srv.url)
        result = _scan(tmp_path)
        assert result.exit_code == 1, result.output
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert summary["batches"]["sent"] == 2
        assert summary["batches"]["kept_unsent"] == summary["batches"]["total"] - 2
        srv.clear()
        assert CliRunner().invoke(cli, ["push", str(tmp_path / "unsent")]).exit_code == 0
        _assert_complete(srv, clean_run[1])


@pytest.mark.spark
def test_resume_state_is_checked_against_atlas(
    clean_run: tuple[Path, Counter[tuple[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultServer() as srv:
        _fast_env(monkeypatch, srv.url)
        assert _scan(tmp_path).exit_code == 0
        srv.reset_atlas()  # Atlas emptied (rebuilt, restored) at the same address
        result = _scan(tmp_path)
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert "resume state does not match Atlas" in summary["resume_reset"]
        assert summary["batches"]["sent"] == summary["batches"]["total"]
        _assert_complete(srv, clean_run[1])
        again = _scan(tmp_path)  # a state that matches Atlas is trusted: nothing to send
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert again.exit_code == 0
        assert summary["batches"]["sent"] == 0
        assert summary["resume_reset"] is None


@pytest.mark.spark
def test_credentials_echoed_to_a_scan_reach_neither_its_output_nor_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Atlas refuses batch after batch (400), each time echoing the credentials another way: nothing of
    them in the output, the logs, summary.json, the unsent batches or any other file of the scan."""
    caplog.set_level(logging.DEBUG)
    with FaultServer() as srv:
        for echo in sorted(ECHOES):
            srv.add(Fault("echo_auth", status=400, echo=echo, method="POST", path_contains="/entity/bulk"))
        _fast_env(monkeypatch, srv.url, retries="0", username=ECHO_USER, password=ECHO_PASSWORD)
        result = _scan(tmp_path, "--batch-size", "5")
        assert srv.faults == []  # every echo was answered to some batch
    assert result.exit_code == 1, result.output
    summary = (tmp_path / "summary.json").read_text(encoding="utf-8")
    assert summary.count("HTTP 400") >= len(ECHOES)
    files = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert _echo_leaks(result.output + caplog.text + files) == []


@pytest.mark.spark
def test_random_faults_over_a_whole_scan_and_a_whole_push(
    clean_run: tuple[Path, Counter[tuple[str, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """30 % of requests fail (5xx, applied-then-5xx, reset, cut-off body): Atlas ends up with exactly the
    clean run's entities, and the password is nowhere: output, DEBUG logs, summary, state, payloads."""
    caplog.set_level(logging.DEBUG)
    with FaultServer() as srv:
        srv.stub.require_auth("admin", CANARY)
        srv.random_faults(0.3, seed=7)
        _fast_env(monkeypatch, srv.url, retries="10", username="admin", password=CANARY)
        result = _scan(tmp_path)
        assert result.exit_code == 0, result.output
        assert Counter(o for _, _, o in srv.log)["ok"] < len(srv.log)  # faults did happen
        _assert_complete(srv, clean_run[1])
    files = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert _leaks(result.output + caplog.text + files) == []
    with FaultServer() as srv:
        srv.random_faults(0.3, seed=11)
        _fast_env(monkeypatch, srv.url, retries="10")
        folder = tmp_path / "replay"
        shutil.copytree(clean_run[0], folder)
        pushed = CliRunner().invoke(cli, ["push", str(folder)])
        assert pushed.exit_code == 0, pushed.output
        assert Counter(o for _, _, o in srv.log)["ok"] < len(srv.log)
        _assert_complete(srv, clean_run[1])
