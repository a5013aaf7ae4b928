"""Settings: precedence arguments > ATLAS_BRIDGE_* env > atlas-application.properties > defaults."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from atlas_bridge.config import Settings, fields_from_properties
from atlas_bridge.errors import ConfigError

PROPS = """\
# an Atlas client config as users have it
atlas.rest.address=http://props-a:21000,http://props-b:21000
atlas.metadata.namespace=prod
atlas.cluster.name=ignored-when-namespace-set
atlas.client.connectTimeoutMSecs=2000
atlas.client.readTimeoutMSecs = 30000
atlas.client.username : props-user
atlas.client.password=props-secret-pw
atlas.hook.atlas_bridge.numRetries=7
atlas.hook.atlas_bridge.queueSize=50
"""


@pytest.fixture
def props_file(tmp_path: Path) -> Path:
    path = tmp_path / "atlas-application.properties"
    path.write_text(PROPS, encoding="utf-8")
    return path


def test_defaults_without_any_source() -> None:
    s = Settings.load()
    assert s.rest_address == []
    assert not s.atlas_configured
    assert s.namespace == "primary"
    assert s.password is None
    assert (s.connect_timeout_s, s.read_timeout_s, s.retries) == (5.0, 60.0, 5)
    assert s.effective_spool_dir == Path("atlas-bridge-out") / "spool"


def test_properties_file_values(props_file: Path) -> None:
    s = Settings.load(props_file)
    assert s.rest_address == ["http://props-a:21000", "http://props-b:21000"]
    assert s.namespace == "prod"
    assert s.connect_timeout_s == 2.0
    assert s.read_timeout_s == 30.0
    assert s.username == "props-user"
    assert s.password is not None
    assert s.password.get_secret_value() == "props-secret-pw"
    assert s.retries == 7
    assert s.queue_size == 50


def test_env_beats_properties(props_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", "http://env-a:21000, http://env-b:21000")
    monkeypatch.setenv("ATLAS_BRIDGE_NAMESPACE", "envns")
    monkeypatch.setenv("ATLAS_BRIDGE_RETRIES", "2")
    s = Settings.load(props_file)
    assert s.rest_address == ["http://env-a:21000", "http://env-b:21000"]
    assert s.namespace == "envns"
    assert s.retries == 2
    # fields the environment does not set still come from the file
    assert s.username == "props-user"
    assert s.read_timeout_s == 30.0


def test_arguments_beat_env_and_properties(props_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", "http://env:21000")
    monkeypatch.setenv("ATLAS_BRIDGE_USERNAME", "env-user")
    s = Settings.load(props_file, rest_address="http://arg:21000", username="arg-user", namespace=None)
    assert s.rest_address == ["http://arg:21000"]
    assert s.username == "arg-user"
    # None arguments (CLI options not given) do not mask the lower layers
    assert s.namespace == "prod"


def test_atlas_conf_directory_is_found(props_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_CONF", str(props_file.parent))
    assert Settings.load().namespace == "prod"
    assert Settings().rest_address == ["http://props-a:21000", "http://props-b:21000"]


def test_explicit_file_beats_atlas_conf(
    props_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "atlas-application.properties").write_text(
        "atlas.cluster.name=from-conf-dir\n", encoding="utf-8"
    )
    monkeypatch.setenv("ATLAS_CONF", str(other))
    assert Settings.load().namespace == "from-conf-dir"
    assert Settings.load(props_file).namespace == "prod"


def test_missing_explicit_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        Settings.load(tmp_path / "nope.properties")


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"atlas.metadata.namespace": "ns", "atlas.cluster.name": "cl"}, "ns"),
        ({"atlas.cluster.name": "cl"}, "cl"),
        ({"atlas.metadata.namespace": "  ", "atlas.cluster.name": "cl"}, "cl"),
        ({}, "primary"),
    ],
)
def test_namespace_fallback_chain(tmp_path: Path, props: dict[str, str], expected: str) -> None:
    path = tmp_path / "a.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    assert Settings.load(path).namespace == expected


def test_java_properties_syntax(tmp_path: Path) -> None:
    """Continuations, escapes and ':' separators, which a hand-written parser gets wrong."""
    path = tmp_path / "a.properties"
    path.write_text(
        "! comment\n"
        "atlas.rest.address = http://a:21000,\\\n    http://b:21000\n"
        "atlas.cluster.name: caf\\u00e9\n",
        encoding="utf-8",
    )
    s = Settings.load(path)
    assert s.rest_address == ["http://a:21000", "http://b:21000"]
    assert s.namespace == "café"


def test_bad_millis_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="readTimeoutMSecs"):
        fields_from_properties({"atlas.client.readTimeoutMSecs": "soon"})


def test_base_urls_get_a_scheme() -> None:
    assert Settings(rest_address="a:21000").base_urls == ["http://a:21000"]
    assert Settings(rest_address="a:21000", enable_tls=True).base_urls == ["https://a:21000"]
    assert Settings(rest_address="https://gw/x/atlas/").base_urls == ["https://gw/x/atlas"]


def test_password_never_in_repr_logs_or_errors(
    props_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("ATLAS_BRIDGE_PASSWORD", "env-secret-pw")
    s = Settings.load(props_file)
    assert s.password is not None
    assert s.password.get_secret_value() == "env-secret-pw"
    for text in (repr(s), str(s), s.model_dump_json(), caplog.text):
        assert "env-secret-pw" not in text
        assert "props-secret-pw" not in text
    with pytest.raises(ConfigError) as info:
        Settings.load(props_file, retries=-1)
    assert "secret-pw" not in str(info.value)


def test_readable_password_file_warns(props_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    props_file.chmod(0o644)
    Settings.load(props_file)
    assert "others may read it" in caplog.text
    caplog.clear()
    props_file.chmod(0o600)
    Settings.load(props_file)
    assert "others may read it" not in caplog.text


def test_addresses_as_json_list_and_credentials_moved_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", '["http://a:21000", "http://b:21000"]')
    assert Settings.load().rest_address == ["http://a:21000", "http://b:21000"]
    s = Settings(rest_address="https://bob:p%40ss-word@gw/x/atlas")
    assert s.rest_address == ["https://gw/x/atlas"]
    assert s.username == "bob"
    assert s.password is not None
    assert s.password.get_secret_value() == "p@ss-word"
    assert "ss-word" not in repr(s)


def test_example_properties_file_loads() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "atlas-application.properties"
    if not example.is_file():
        pytest.skip("no examples/atlas-application.properties")
    s = Settings.load(example)
    assert s.rest_address == ["http://atlas.example.com:21000"]
    assert s.namespace == "primary"
    assert s.password is None
