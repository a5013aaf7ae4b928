"""AtlasClient against the stub: retries, failover, typed errors, timeouts, auth, path prefixes."""

from __future__ import annotations

import base64
import logging
import socket
from pathlib import Path

import pytest
import requests
import responses
from apache_atlas.model.misc import SearchFilter
from atlas_stub import AtlasStub

from atlas_bridge import __version__
from atlas_bridge.atlas.client import AtlasClient, RetryPolicy
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.config import Settings
from atlas_bridge.errors import (
    AtlasAuthError,
    AtlasConflictError,
    AtlasError,
    AtlasNotFoundError,
    AtlasUnavailableError,
    ConfigError,
)

SECRET = "s3cret-Pa55word"
TABLE = {
    "entityDefs": [
        {
            "name": "t_table",
            "superTypes": ["DataSet"],
            "attributeDefs": [],
            "serviceType": "t",
            "typeVersion": "1.0",
        }
    ]
}


def _client(stub: AtlasStub, **kwargs: object) -> AtlasClient:
    kwargs.setdefault("backoff", 0)
    return AtlasClient(stub.base_url, **kwargs)  # type: ignore[arg-type]


def _table(qn: str, guid: str = "-1") -> dict[str, object]:
    return {"typeName": "t_table", "guid": guid, "attributes": {"qualifiedName": qn, "name": qn}}


def test_503_503_200_succeeds_with_retries(atlas_stub: AtlasStub) -> None:
    atlas_stub.fail_next(503, times=2)
    headers = _client(atlas_stub).get_typedef_headers()
    assert {h["name"] for h in headers} >= {"DataSet", "Process", "Referenceable"}
    assert [r.status for r in atlas_stub.received] == [503, 503, 200]


def test_retries_cover_post_and_429(atlas_stub: AtlasStub) -> None:
    client = _client(atlas_stub)
    client.create_typedefs(TABLE)
    atlas_stub.fail_next(429, times=1, headers={"Retry-After": "0"})
    atlas_stub.fail_next(502, times=1)
    response = client.post_entities({"entities": [_table("db.a@p")], "referredEntities": {}})
    assert len(response["mutatedEntities"]["CREATE"]) == 1
    assert [r.status for r in atlas_stub.requests_to("POST", "/entity/bulk")] == [429, 502, 200]


def test_retries_exhausted_gives_unavailable_with_data(atlas_stub: AtlasStub) -> None:
    atlas_stub.fail_next(503, times=None, body="Service Unavailable")
    with pytest.raises(AtlasUnavailableError) as info:
        _client(atlas_stub, retries=2).get_all_typedefs()
    err = info.value
    assert err.status_code == 503
    assert err.url == "http://atlas.test:21000/api/atlas/v2/types/typedefs"
    assert err.body == "Service Unavailable"
    assert "HTTP 503" in str(err)
    assert "after 2 retries" in str(err)
    assert len(atlas_stub.received) == 3


def test_retry_after_is_obeyed_up_to_the_cap(atlas_stub: AtlasStub) -> None:
    """``Retry-After`` is honoured, but 3600 s is not: the wait is capped (the client's sleep is recorded)."""
    client = AtlasClient(atlas_stub.base_url, backoff=0, policy=RetryPolicy(retry_after_cap_s=30))
    slept: list[float] = []
    client._sleep = slept.append
    atlas_stub.fail_next(503, times=1, headers={"Retry-After": "7"})
    atlas_stub.fail_next(429, times=1, headers={"Retry-After": "3600"})
    atlas_stub.fail_next(429, times=1, headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"})
    client.get_typedef_headers()
    assert slept == [7.0, 30.0, 30.0]


def test_retry_policy_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(backoff_s=0.5, retry_after_cap_s=3)
    assert [policy.wait(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert policy.wait(1, 2.5) == 2.5
    assert policy.wait(1, 1e9) == 3


def test_connection_refused_ends_in_clear_error(atlas_stub: AtlasStub) -> None:
    atlas_stub.refuse_connections()
    with pytest.raises(AtlasUnavailableError) as info:
        _client(atlas_stub).post_entities({"entities": [_table("db.a@p")]})
    assert str(info.value).startswith(
        "cannot reach Atlas at http://atlas.test:21000: connection refused (POST api/atlas/v2/entity/bulk)"
    )
    assert info.value.status_code is None


def test_real_refused_port_is_retried_then_unavailable() -> None:
    """A real closed port (no mock): urllib3 retries the connect, then we raise AtlasUnavailableError."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = AtlasClient(f"http://127.0.0.1:{port}", retries=2, backoff=0, timeout=(1, 1))
    with pytest.raises(
        AtlasUnavailableError,
        match=r"^cannot reach Atlas at http://127\.0\.0\.1:\d+: connection refused \(GET",
    ):
        client.get_typedef_headers()


def test_connection_refused_through_atlas_sink_keeps_payload(atlas_stub: AtlasStub, tmp_path: Path) -> None:
    atlas_stub.refuse_connections()
    sink = AtlasSink(_client(atlas_stub), spool_dir=tmp_path / "spool")
    batch = {"entities": [_table("db.a@p")], "referredEntities": {}}
    sink.emit(batch)
    kept = sorted(p.name for p in (tmp_path / "spool").iterdir() if not p.name.startswith("."))  # its lock
    assert kept == ["0001-entities.json", "manifest.json"]
    assert sink.report.spooled == 1
    assert sink.spool_pending() == 1


def test_401_names_the_user_never_the_password(
    atlas_stub: AtlasStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    atlas_stub.require_auth("alice", "right-password")
    client = _client(atlas_stub, username="bob", password=SECRET)
    with pytest.raises(AtlasAuthError) as info:
        client.get_typedef_headers()
    err = info.value
    assert err.status_code == 401
    assert "'bob'" in str(err)
    assert "HTTP 401" in str(err)
    token = base64.b64encode(f"bob:{SECRET}".encode()).decode()
    for text in (str(err), repr(err), err.body or "", err.url or "", caplog.text, repr(client)):
        assert SECRET not in text
        assert token not in text
    # the right credentials work, and 401 is not retried
    assert len(atlas_stub.received) == 1
    assert _client(atlas_stub, username="alice", password="right-password").get_typedef_headers()


def test_password_echoed_by_server_is_scrubbed(atlas_stub: AtlasStub) -> None:
    atlas_stub.fail_next(400, body=f'{{"errorCode":"ATLAS-400-00-029","errorMessage":"bad {SECRET}"}}')
    with pytest.raises(AtlasError) as info:
        _client(atlas_stub, username="bob", password=SECRET).get_all_typedefs()
    assert info.value.error_code == "ATLAS-400-00-029"
    assert SECRET not in str(info.value)
    assert SECRET not in (info.value.body or "")


def test_credentials_in_the_url_are_moved_out(atlas_stub: AtlasStub) -> None:
    atlas_stub.require_auth("bob", SECRET)
    client = AtlasClient(f"http://bob:{SECRET}@atlas.test:21000/", backoff=0)
    assert client.base_urls == ["http://atlas.test:21000"]
    assert client.get_typedef_headers()
    with pytest.raises(AtlasNotFoundError) as info:
        client.get_entity_by_guid("nope")
    assert SECRET not in str(info.value)
    assert SECRET not in (info.value.url or "")


def test_error_data_is_carried(atlas_stub: AtlasStub) -> None:
    client = _client(atlas_stub)
    client.create_typedefs(TABLE)
    with pytest.raises(AtlasConflictError) as info:
        client.create_typedefs(TABLE)
    err = info.value
    assert (err.status_code, err.error_code) == (409, "ATLAS-409-00-001")
    assert err.url == "http://atlas.test:21000/api/atlas/v2/types/typedefs"
    assert "Given type t_table already exists" in str(err)
    assert "ATLAS-409-00-001" in str(err)
    assert err.body is not None
    assert '"errorCode"' in err.body

    with pytest.raises(AtlasNotFoundError) as nf:
        client.get_entity_by_guid("no-such-guid")
    assert nf.value.error_code == "ATLAS-404-00-005"
    assert client.get_entity("t_table", "db.none@p") is None
    assert client.get_typedef("no_such_type") is None

    with pytest.raises(AtlasNotFoundError) as missing:
        client.post_entities({"entities": [{"typeName": "t_table", "attributes": {"qualifiedName": "x"}}]})
    assert missing.value.error_code == "ATLAS-404-00-007"
    assert missing.value.status_code == 404


def test_timeout_and_user_agent_on_every_call(atlas_stub: AtlasStub) -> None:
    client = _client(atlas_stub, timeout=(3, 45))
    client.create_typedefs(TABLE)
    client.update_typedefs(TABLE)
    client.get_typedef_headers()
    client.get_all_typedefs(type="ENTITY")
    client.get_typedef("t_table")
    guid = client.post_entities({"entities": [_table("db.a@p")]})["guidAssignments"]["-1"]
    client.get_entity("t_table", "db.a@p")
    client.get_entity_by_guid(guid)
    client.get_lineage(guid)
    client.get_lineage_by_qualified_name("t_table", "db.a@p", direction="INPUT", depth=0)
    client.delete_entity(guid)
    client.apache_atlas.typedef.get_entitydef_by_name("t_table")  # the official client on our session
    calls = list(atlas_stub.mock.calls)
    assert len(calls) == 12
    for call in calls:
        assert call.request.req_kwargs["timeout"] == (3.0, 45.0), call.request.url
        assert call.request.headers["User-Agent"].startswith(f"atlas-bridge/{__version__} ")
        assert "X-Requested-With" not in call.request.headers


def test_base_url_with_path_prefix() -> None:
    with AtlasStub("https://gw.test/x/atlas") as stub:
        client = AtlasClient("https://gw.test/x/atlas/", backoff=0)
        assert client.get_typedef_headers()
        assert stub.received[-1].path == "/x/atlas/api/atlas/v2/types/typedefs/headers"
        # the official client drops the prefix (urljoin); ours hands it a host that keeps it
        official = client.apache_atlas
        assert official.typedef.get_all_typedef_headers(SearchFilter())
        assert stub.received[-1].path.startswith("/x/atlas/api/atlas/v2/types/typedefs/headers")


def test_failover_to_the_next_address(atlas_stub: AtlasStub) -> None:
    down = "http://down.test:21000"
    atlas_stub.mock.add(
        responses.GET, f"{down}/api/atlas/v2/types/typedefs/headers", body=requests.ConnectionError()
    )
    client = AtlasClient([down, atlas_stub.base_url], backoff=0)
    assert client.get_typedef_headers()
    assert client.base_url == atlas_stub.base_url
    assert client.get_typedef_headers()  # the working address is kept: no second try of the dead one
    assert sum(1 for c in atlas_stub.mock.calls if c.request.url.startswith(down)) == 1


def test_failover_all_down(atlas_stub: AtlasStub) -> None:
    atlas_stub.fail_next(503, times=None)
    down = "http://down.test:21000"
    atlas_stub.mock.add(responses.GET, f"{down}/api/atlas/v2/types/typedefs", body=requests.ConnectionError())
    with pytest.raises(AtlasUnavailableError, match=r"no Atlas address answered \(2 tried\)") as info:
        AtlasClient([down, atlas_stub.base_url], backoff=0, retries=1).get_all_typedefs()
    assert info.value.status_code == 503


def test_wraps_an_apache_atlas_client(atlas_stub: AtlasStub) -> None:
    from apache_atlas.client.base_client import AtlasClient as OfficialClient

    atlas_stub.require_auth("alice", "right-password")
    official = OfficialClient(atlas_stub.base_url, ("alice", SECRET))
    client = AtlasClient.from_apache_atlas(official, backoff=0)
    assert client.session is official.session
    with pytest.raises(AtlasAuthError) as info:
        client.get_typedef_headers()
    assert "'alice'" in str(info.value)
    assert SECRET not in str(info.value)
    # the official client's own calls now get our retries too (instead of None/exception on 503)
    official.session.auth = ("alice", "right-password")
    atlas_stub.fail_next(503, times=2)
    assert official.typedef.get_all_typedefs(SearchFilter()) is not None


def test_from_settings(atlas_stub: AtlasStub) -> None:
    settings = Settings(
        rest_address=[atlas_stub.base_url], username="bob", password=SECRET, backoff_s=0, retries=1
    )
    atlas_stub.require_auth("bob", SECRET)
    client = AtlasClient.from_settings(settings)
    assert client.timeout == (5.0, 60.0)
    assert client.get_typedef_headers()
    with pytest.raises(ConfigError, match="no Atlas address"):
        AtlasClient.from_settings(Settings())


def test_kerberos_needs_the_extra() -> None:
    pytest.importorskip("requests")
    try:
        import requests_kerberos  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="kerberos"):
            AtlasClient.from_settings(Settings(rest_address=["http://a:21000"], kerberos=True))
    else:  # pragma: no cover - depends on the environment
        client = AtlasClient.from_settings(Settings(rest_address=["http://a:21000"], kerberos=True))
        assert client.session.auth is not None


def test_any_requests_auth_object(atlas_stub: AtlasStub) -> None:
    class TokenAuth(requests.auth.AuthBase):
        def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
            r.headers["Authorization"] = "Bearer tok"
            return r

    _client(atlas_stub, auth=TokenAuth()).get_typedef_headers()
    assert atlas_stub.received[-1].headers["Authorization"] == "Bearer tok"


def test_bad_addresses_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        AtlasClient([])
    with pytest.raises(ConfigError, match="http"):
        AtlasClient("ftp://atlas:21000")
    with pytest.raises(ConfigError) as info:
        AtlasClient(f"bob:{SECRET}@atlas:21000")
    assert SECRET not in str(info.value)


def test_tls_options() -> None:
    assert AtlasClient("https://a", verify=False).session.verify is False
    assert AtlasClient("https://a", verify="/etc/ca.pem").session.verify == "/etc/ca.pem"
    s = Settings(rest_address=["https://a"], ca_bundle="/etc/ca.pem")
    assert AtlasClient.from_settings(s).session.verify == "/etc/ca.pem"


def test_passive_instance_redirect_moves_to_the_active_peer(atlas_stub: AtlasStub) -> None:
    """Atlas HA: a passive server answers 307 (writes) / 302 (reads) pointing at the active one."""
    atlas_stub.require_auth("bob", SECRET)
    atlas_stub.load_typedefs(TABLE)
    with AtlasStub("http://passive.test:21000", mock=atlas_stub.mock) as passive:
        location = atlas_stub.base_url + "/api/atlas/v2/entity/bulk"
        passive.fail_next(307, times=None, headers={"Location": location})
        client = AtlasClient(
            [passive.base_url, atlas_stub.base_url], username="bob", password=SECRET, backoff=0
        )
        result = client.post_entities({"entities": [_table("db.a@p")]})
        assert (
            len(result["mutatedEntities"]["CREATE"]) == 1
        )  # the body and the credentials reached the active one
        assert client.base_url == atlas_stub.base_url
        assert [r.status for r in passive.received] == [307]


def test_redirect_elsewhere_is_not_followed(atlas_stub: AtlasStub) -> None:
    atlas_stub.fail_next(302, headers={"Location": "http://evil.test/api/atlas/v2/types/typedefs?x=1"})
    with pytest.raises(
        AtlasError, match=r"redirected GET .* to http://evil\.test/api/atlas/v2/types/typedefs \(HTTP 302\)"
    ):
        _client(atlas_stub, username="bob", password=SECRET).get_all_typedefs()
    assert len(atlas_stub.received) == 1
