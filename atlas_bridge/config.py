"""One settings object for every entry point (CLI, Spark hook, batch import).

Atlas users already keep an ``atlas-application.properties``; we read it (with ``javaproperties``, which
gets Java's continuations, escapes and separators right) instead of asking for a second config format.
Atlas's ``${sys:...}`` interpolation is a server-side feature and is not supported here.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import javaproperties
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from atlas_bridge.errors import ConfigError

logger = logging.getLogger(__name__)

PROPERTIES_FILE_NAME = "atlas-application.properties"

# The properties file chosen by Settings.load(); None = look in $ATLAS_CONF.
_properties_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "atlas_bridge_properties_file", default=None
)

_HOOK = "atlas.hook.atlas_bridge."

# atlas-application.properties key -> Settings field. Atlas's own keys first; the ``atlas.client.username``
# / ``password`` pair and the ``atlas.hook.atlas_bridge.*`` keys are ours (Atlas's Java client has no
# user-name key; the hook keys follow the Hive hook's ``atlas.hook.<name>.*`` pattern).
PROPERTY_KEYS: dict[str, str] = {
    "atlas.rest.address": "rest_address",
    "atlas.client.connectTimeoutMSecs": "connect_timeout_s",
    "atlas.client.readTimeoutMSecs": "read_timeout_s",
    "atlas.client.username": "username",
    "atlas.client.password": "password",
    "atlas.authentication.method.kerberos": "kerberos",
    "atlas.enableTLS": "enable_tls",
    _HOOK + "openlineage": "openlineage",
    _HOOK + "openlineage.apiKey": "openlineage_api_key",
    _HOOK + "openlineage.jobNamespace": "openlineage_job_namespace",
    _HOOK + "numRetries": "retries",
    _HOOK + "backoffSecs": "backoff_s",
    _HOOK + "requestDeadlineSecs": "request_deadline_s",
    _HOOK + "retryAfterCapSecs": "retry_after_cap_s",
    _HOOK + "giveUpAfterSecs": "give_up_after_s",
    _HOOK + "verifyTLS": "verify_tls",
    _HOOK + "caBundle": "ca_bundle",
    _HOOK + "outputDir": "output_dir",
    _HOOK + "spoolDir": "spool_dir",
    _HOOK + "closeTimeoutSecs": "close_timeout_s",
    _HOOK + "reuseTypes": "reuse_types",
    _HOOK + "disabled": "disabled",
    _HOOK + "queueSize": "queue_size",
    _HOOK + "synchronous": "synchronous",
    _HOOK + "delivery": "delivery",
    # Kafka, as Atlas's Java hooks read it: ``atlas.kafka.*`` is handed to the Kafka producer with the
    # prefix cut, ``atlas.notification.*`` shapes the HookNotification envelope.
    "atlas.kafka.bootstrap.servers": "kafka_bootstrap_servers",
    "atlas.notification.hook.topic.name": "kafka_topic",
    "atlas.kafka.security.protocol": "kafka_security_protocol",
    "atlas.kafka.sasl.mechanism": "kafka_sasl_mechanism",
    "atlas.kafka.sasl.jaas.config": "kafka_sasl_jaas_config",
    "atlas.kafka.sasl.kerberos.service.name": "kafka_sasl_kerberos_service_name",
    "atlas.kafka.ssl.truststore.location": "kafka_ssl_cafile",
    "atlas.kafka.ssl.keystore.location": "kafka_ssl_certfile",
    "atlas.kafka.ssl.key.password": "kafka_ssl_key_password",
    "atlas.notification.message.max.length.bytes": "message_max_length_bytes",
    "atlas.notification.message.compression.enabled": "message_compression",
    _HOOK + "kafka.sasl.username": "kafka_sasl_username",
    _HOOK + "kafka.sasl.password": "kafka_sasl_password",
    _HOOK + "kafka.requestTimeoutSecs": "kafka_request_timeout_s",
}
_MILLIS_FIELDS = {"connect_timeout_s", "read_timeout_s"}
# Keys whose value is a secret: a properties file holding one should be readable by its owner only.
_SECRET_KEYS = (
    "atlas.client.password",
    "atlas.kafka.sasl.jaas.config",
    "atlas.kafka.ssl.key.password",
    _HOOK + "kafka.sasl.password",
)
# Kafka's switch for hostname verification: an empty value turns it off (Java Kafka's convention).
_ENDPOINT_CHECK_KEY = "atlas.kafka.ssl.endpoint.identification.algorithm"
_NAMESPACE_KEYS = ("atlas.metadata.namespace", "atlas.cluster.name")


AMBIGUOUS_ADDRESS = (
    "holds '@' and then '/', '?' or '#' before another '@', so where its password ends and its host begins"
    " cannot be told (credentials could go to the wrong host); percent-encode them in the address"
    " ('@' as %40, '/' as %2F, '?' as %3F, '#' as %23) or give the password apart (ATLAS_BRIDGE_PASSWORD,"
    " atlas.client.password, or --user and a prompt)"
)
"""The reason an address is refused; it quotes no part of the address (a password may be any of it)."""


def split_userinfo(address: str) -> tuple[str, str | None, str | None]:
    """``scheme://user:password@host...`` -> (the address without them, user, password), unquoted.

    The userinfo ends at the last ``@``: a password may hold ``/``, ``?``, ``#`` or ``@`` unquoted. But an
    ``@`` then one of ``/?#`` then another ``@`` reads two ways (``http://u:P@ss/w0rd@host``: password
    ``P`` for host ``ss``, or ``P@ss/w0rd`` for ``host``): a ValueError saying so, with no part of it.

    >>> split_userinfo("http://admin:p%40ss@atlas:21000/gw")
    ('http://atlas:21000/gw', 'admin', 'p@ss')
    >>> split_userinfo("https://atlas:21000")
    ('https://atlas:21000', None, None)
    """
    scheme, sep, rest = address.partition("://") if "://" in address else ("", "", address)
    first, last = rest.find("@"), rest.rfind("@")
    if first < 0:
        return address, None, None
    if any(c in rest[first:last] for c in "/?#"):
        raise ValueError(AMBIGUOUS_ADDRESS)
    userinfo, _, host = rest.rpartition("@")
    user, colon, password = userinfo.partition(":")
    return scheme + sep + host, unquote(user) or None, unquote(password) if colon else None


def find_properties_file(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The file to read: ``explicit`` if given (it must exist), else ``$ATLAS_CONF``'s, else None."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            msg = f"Atlas properties file not found: {path}"
            raise ConfigError(msg)
        return path
    conf_dir = os.environ.get("ATLAS_CONF")
    if conf_dir:
        path = Path(conf_dir) / PROPERTIES_FILE_NAME
        if path.is_file():
            return path
        logger.debug("ATLAS_CONF is set but holds no %s", PROPERTIES_FILE_NAME)
    return None


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse a Java ``.properties`` file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return dict(javaproperties.load(fh))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        msg = f"cannot read Atlas properties file {path}: {e.__class__.__name__}"
        raise ConfigError(msg) from e


def fields_from_properties(props: Mapping[str, str]) -> dict[str, Any]:
    """Map Atlas property keys to ``Settings`` field values (unknown keys are ignored).

    Public so the Spark hook can feed ``spark.atlas.*`` conf through the same table.

    >>> fields_from_properties({"atlas.rest.address": "http://a:21000", "atlas.cluster.name": "c1"})
    {'rest_address': 'http://a:21000', 'namespace': 'c1'}
    >>> fields_from_properties({"atlas.client.readTimeoutMSecs": "30000"})
    {'read_timeout_s': 30.0}
    """
    out: dict[str, Any] = {}
    for key, field in PROPERTY_KEYS.items():
        value = props.get(key)
        if value is None or value.strip() == "":
            continue
        value = value.strip()
        if field in _MILLIS_FIELDS:
            try:
                out[field] = int(value) / 1000.0
            except ValueError as e:
                msg = f"{key} must be a number of milliseconds, got {value!r}"
                raise ConfigError(msg) from e
        else:
            out[field] = value
    if _ENDPOINT_CHECK_KEY in props:
        out["kafka_ssl_check_hostname"] = props[_ENDPOINT_CHECK_KEY].strip().lower() == "https"
    if "kafka_sasl_kerberos_service_name" not in out:
        service = props.get("atlas.jaas.KafkaClient.option.serviceName", "").strip()
        if service:
            out["kafka_sasl_kerberos_service_name"] = service
    for key in _NAMESPACE_KEYS:
        value = props.get(key, "").strip()
        if value:
            out["namespace"] = value
            break
    return out


class _PropertiesSource(PydanticBaseSettingsSource):
    """Settings from ``atlas-application.properties`` (explicit path, else ``$ATLAS_CONF``)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        # Unused: __call__ maps the whole file at once.
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = find_properties_file(_properties_file.get())
        if path is None:
            return {}
        logger.debug("reading Atlas settings from %s", path)
        props = read_properties(path)
        secrets = [k for k in _SECRET_KEYS if props.get(k)]
        if secrets and os.name == "posix" and path.stat().st_mode & 0o077:
            logger.warning("%s holds %s but others may read it (chmod 600)", path, ", ".join(secrets))
        return fields_from_properties(props)


class Settings(BaseSettings):
    """Where Atlas is, how to reach it, and where payloads go when it is not there.

    Precedence, highest first:

    1. arguments (``Settings(...)`` / ``Settings.load(**overrides)``; the Spark hook passes Spark conf here);
    2. ``ATLAS_BRIDGE_<FIELD>`` environment variables (``ATLAS_BRIDGE_REST_ADDRESS=http://a:21000,http://b:21000``,
       ``ATLAS_BRIDGE_PASSWORD``...);
    3. ``atlas-application.properties``: the file given to :meth:`load` or ``--config``, else
       ``$ATLAS_CONF/atlas-application.properties`` (keys in :data:`PROPERTY_KEYS`; the namespace comes from
       ``atlas.metadata.namespace``, else ``atlas.cluster.name``);
    4. the defaults below (namespace ``primary``, as Atlas's hooks default it).

    Each field is resolved on its own, so a file can give the address and the environment the password.
    An empty ``rest_address`` means "no Atlas": :func:`atlas_bridge.atlas.sink.make_sink` then writes files.
    The password is a ``SecretStr``; it never shows in ``repr``, logs or errors.
    """

    model_config = SettingsConfigDict(
        env_prefix="ATLAS_BRIDGE_",
        extra="ignore",
        validate_default=True,
        case_sensitive=False,
    )

    rest_address: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Atlas base URLs (several = HA failover, tried in order). May carry a path prefix behind a gateway."""
    username: str | None = None
    password: SecretStr | None = None
    kerberos: bool = False
    """Authenticate with SPNEGO (needs the ``kerberos`` extra: requests-kerberos)."""
    namespace: str = "primary"
    """The ``@namespace`` suffix of qualifiedNames (Atlas's metadata namespace / cluster name)."""
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    """Atlas's own client default (``atlas.client.readTimeoutMSecs`` = 60000)."""
    retries: int = Field(default=5, ge=0)
    backoff_s: float = Field(default=0.5, ge=0)
    request_deadline_s: float = Field(default=90.0, gt=0)
    """Longest time one request may take, headers and body (a read timeout alone bounds each read only)."""
    retry_after_cap_s: float = Field(default=30.0, ge=0)
    """Longest wait obeyed from a 429/503 ``Retry-After``."""
    give_up_after_s: float = Field(default=120.0, gt=0)
    """Longest time spent on one call, retries included, before Atlas is declared not answering: from then
    on a run keeps its batches on disk (``push`` sends them later) instead of waiting for Atlas again."""
    enable_tls: bool = False
    """Use https for addresses given without a scheme (``atlas.enableTLS``)."""
    verify_tls: bool = True
    ca_bundle: Path | None = None
    """PEM bundle to verify Atlas's certificate with (Java truststores cannot be read from Python)."""
    output_dir: Path = Path("atlas-bridge-out")
    """Where the file sink writes request bodies when no Atlas is configured."""
    spool_dir: Path | None = None
    """Where undeliverable batches are kept for a later ``flush_spool``; default ``<output_dir>/spool``."""
    disabled: bool = False
    """Hook switch: install nothing and emit nothing."""
    queue_size: int = Field(default=1000, ge=1)
    """Hook: bounded queue between Spark's listener bus and the sending thread."""
    reuse_types: str = "default"
    """Other hooks' types whose entities our lineage points at instead of creating its own (``hive_table,
    hive_column,hdfs_path,...``); ``default`` = the Hive, HDFS and S3 types; ``none`` switches it off."""
    close_timeout_s: float = Field(default=5.0, ge=0)
    """Hook: the most a job's end waits for Atlas; what is not delivered by then goes to the spool."""
    synchronous: bool = False
    """Hook: send from the callback thread instead of the background worker (tests, debugging)."""
    delivery: Literal["auto", "rest", "kafka"] = "auto"
    """Where the hook's sink sends: ``auto`` = Kafka when bootstrap servers are set (as Atlas's hooks do),
    else Atlas's REST API when an address is set, else files."""

    openlineage: str | None = None
    """Where the hook (and ``scan --to openlineage``) also sends OpenLineage run events: an endpoint URL
    (``http://marquez:5000``; events are POSTed to ``/api/v1/lineage``) or a folder of event files."""
    openlineage_api_key: SecretStr | None = None
    """Bearer token for the OpenLineage endpoint."""
    openlineage_job_namespace: str = "atlas-bridge"
    """The OpenLineage namespace of the jobs our statements become."""

    kafka_bootstrap_servers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """``host:port`` of Kafka brokers (``atlas.kafka.bootstrap.servers``); empty = no Kafka."""
    kafka_topic: str = "ATLAS_HOOK"
    """Topic Atlas consumes hook messages from (``atlas.notification.hook.topic.name``)."""
    kafka_security_protocol: str = "PLAINTEXT"
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (``atlas.kafka.security.protocol``)."""
    kafka_sasl_mechanism: str | None = None
    """PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or GSSAPI (``atlas.kafka.sasl.mechanism``)."""
    kafka_sasl_jaas_config: SecretStr | None = None
    """Java's JAAS line; the user name and password are read from it for PLAIN / SCRAM."""
    kafka_sasl_username: str | None = None
    """SASL user when no JAAS line gives one (``ATLAS_BRIDGE_KAFKA_SASL_USERNAME``)."""
    kafka_sasl_password: SecretStr | None = None
    """SASL password when no JAAS line gives one (``ATLAS_BRIDGE_KAFKA_SASL_PASSWORD``)."""
    kafka_sasl_kerberos_service_name: str | None = None
    """Kerberos service name of the brokers (GSSAPI; usually ``kafka``)."""
    kafka_ssl_cafile: Path | None = None
    """PEM file of the CA(s) to verify brokers with (``atlas.kafka.ssl.truststore.location`` of type PEM)."""
    kafka_ssl_certfile: Path | None = None
    """PEM file with our client certificate and key, for mutual TLS (``atlas.kafka.ssl.keystore.location``
    of type PEM)."""
    kafka_ssl_key_password: SecretStr | None = None
    kafka_ssl_check_hostname: bool = True
    """Check the broker's host name against its certificate (off when Kafka's
    ``ssl.endpoint.identification.algorithm`` is empty)."""
    kafka_request_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for the brokers to acknowledge a message before it counts as not delivered."""
    message_max_length_bytes: int = Field(default=1_000_000, gt=1024)
    """Atlas's ``atlas.notification.message.max.length.bytes``: larger messages are compressed, then split."""
    message_compression: bool = True
    """Atlas's ``atlas.notification.message.compression.enabled``: GZIP large messages before splitting."""

    @field_validator("kafka_bootstrap_servers", mode="before")
    @classmethod
    def _split_servers(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else text.split(",")
        if isinstance(value, (list, tuple)):
            servers = [str(v).strip() for v in value if str(v).strip()]
            for i, server in enumerate(servers, 1):
                if "@" in server:
                    # Kafka takes no credentials in an address; this one would be printed in errors.
                    msg = (
                        f"Kafka bootstrap server #{i} holds '@': give host:port only, and the credentials in"
                        " atlas.kafka.sasl.jaas.config or ATLAS_BRIDGE_KAFKA_SASL_USERNAME / _PASSWORD"
                    )
                    raise ValueError(msg)
            return servers
        return value

    @field_validator("kafka_security_protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        value = value.strip().upper()
        value = {"PLAINTEXTSASL": "SASL_PLAINTEXT"}.get(value, value)  # the old HDP spelling
        if value not in {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}:
            msg = "kafka_security_protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            raise ValueError(msg)
        return value

    @field_validator("rest_address", mode="before")
    @classmethod
    def _split_addresses(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except ValueError as e:
                    msg = "rest_address: not a JSON list nor comma-separated URLs"
                    raise ValueError(msg) from e
            else:
                value = text.split(",")
        if isinstance(value, (list, tuple)):
            return [str(v).strip().rstrip("/") for v in value if str(v).strip()]
        return value

    @model_validator(mode="after")
    def _credentials_out_of_addresses(self) -> Settings:
        """``http://user:pw@host`` -> basic auth fields, so the password never shows in an address."""
        cleaned: list[str] = []
        for i, address in enumerate(self.rest_address, 1):
            try:
                clean, user, password = split_userinfo(address)
            except ValueError as e:
                msg = f"Atlas address #{i} {e}"
                raise ValueError(msg) from None
            if self.username is None and user:
                self.username = user
            if self.password is None and password:
                self.password = SecretStr(password)
            cleaned.append(clean)
        self.rest_address = cleaned
        return self

    @field_validator("namespace")
    @classmethod
    def _non_empty_namespace(cls, value: str) -> str:
        value = value.strip()
        if not value:
            msg = "namespace must not be empty"
            raise ValueError(msg)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _PropertiesSource(settings_cls)

    @classmethod
    def load(cls, properties_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
        """Settings from arguments, environment and properties file (see the class docstring).

        ``None`` overrides are dropped, so CLI options that were not given do not mask lower layers.
        """
        given = {k: v for k, v in overrides.items() if v is not None}
        with _using_properties(Path(properties_file) if properties_file is not None else None):
            try:
                return cls(**given)
            except ValidationError as e:
                # Never pydantic's own text: it quotes the input (input_value=...), which may hold a
                # password (an address with credentials, a list given where a string was expected).
                problems = "; ".join(
                    _problem(err) for err in e.errors(include_input=False, include_url=False)
                )
                msg = f"invalid atlas-bridge settings: {problems}"
                raise ConfigError(msg) from None
            except ValueError as e:
                msg = f"invalid atlas-bridge settings: {e.__class__.__name__}"
                raise ConfigError(msg) from None

    @property
    def atlas_configured(self) -> bool:
        """Whether any Atlas address is set (else the file sink is the default)."""
        return bool(self.rest_address)

    @property
    def base_urls(self) -> list[str]:
        """``rest_address`` with a scheme on each (https when ``enable_tls``)."""
        scheme = "https" if self.enable_tls else "http"
        return [a if "://" in a else f"{scheme}://{a}" for a in self.rest_address]

    @property
    def kafka_configured(self) -> bool:
        """Whether Kafka bootstrap servers are set (the hook then publishes to Atlas's hook topic)."""
        return bool(self.kafka_bootstrap_servers)

    @property
    def sink_kind(self) -> str:
        """What :func:`~atlas_bridge.atlas.sink.make_sink` builds: ``kafka``, ``rest`` or ``files``."""
        if self.delivery == "kafka" or (self.delivery == "auto" and self.kafka_configured):
            return "kafka"
        if self.atlas_configured:
            return "rest"
        return "files"

    @property
    def effective_spool_dir(self) -> Path:
        return self.spool_dir if self.spool_dir is not None else self.output_dir / "spool"


def _problem(err: Any) -> str:
    """One of pydantic's errors as ``field: reason`` (a whole-settings check has no field)."""
    where = ".".join(str(x) for x in err["loc"])
    reason = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {reason}" if where else reason


@contextmanager
def _using_properties(path: Path | None) -> Iterator[None]:
    token = _properties_file.set(path)
    try:
        yield
    finally:
        _properties_file.reset(token)
