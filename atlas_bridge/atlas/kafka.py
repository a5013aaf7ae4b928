"""Atlas hook messages on Kafka, byte for byte as Atlas's Java hooks write them.

Atlas's hooks do not call the REST API: they publish ``HookNotification`` messages to the ``ATLAS_HOOK``
topic and Atlas ingests them at its own pace (``NotificationHookConsumer``). The envelope, from Atlas's
``AbstractNotification.createNotificationMessages`` and the ``AtlasNotification*Message`` classes:

* ``AtlasNotificationMessage``: ``version`` (``{"version": "1.0.0", "versionParts": [1]}``),
  ``msgCompressionKind`` ``NONE``, ``msgSplitIdx`` 1, ``msgSplitCount`` 1, ``msgSourceIP``, ``msgCreatedBy``,
  ``msgCreationTime`` (epoch ms), ``spooled`` false, and ``message``: the ``HookNotification``
  (``{"type": "ENTITY_CREATE_V2", "user": ..., "entities": <AtlasEntitiesWithExtInfo>}``);
* a message over ``atlas.notification.message.max.length.bytes`` (default 1,000,000) less 512 bytes kept
  for the envelope is GZIP-compressed and base64-encoded into an ``AtlasNotificationStringMessage``
  (``msgId``, ``msgCompressionKind`` ``GZIP``); if that is still too long, the base64 text is cut into
  parts of that length, ``msgSplitIdx`` 0..n-1 of ``msgSplitCount`` n, which Atlas's consumer joins by
  ``msgId`` (``AtlasNotificationMessageDeserializer``).

The builders and :func:`decode_messages` are pure. :class:`KafkaPublisher` does the I/O (kafka-python);
it is the ``post_entities`` of an Atlas client for Kafka, so :class:`~atlas_bridge.atlas.sink.AtlasSink`'s
spool, ``push_directory``'s resume state and the scan's unsent folder all work unchanged on top of it.
"""

from __future__ import annotations

import base64
import getpass
import json
import logging
import math
import re
import socket
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from atlas_bridge.errors import (
    AtlasError,
    ConfigError,
    KafkaAuthError,
    KafkaUnavailableError,
    NotificationError,
)

if TYPE_CHECKING:
    from atlas_bridge.config import Settings

logger = logging.getLogger(__name__)

MESSAGE_VERSION = "1.0.0"
"""``AbstractNotification.CURRENT_MESSAGE_VERSION``."""
DEFAULT_MAX_LENGTH_BYTES = 1_000_000
"""``atlas.notification.message.max.length.bytes``'s default."""
ENVELOPE_RESERVE_BYTES = 512
"""``AtlasNotificationBaseMessage.MESSAGE_MAX_LENGTH_BYTES`` is the configured length less this."""
ENTITY_CREATE_V2 = "ENTITY_CREATE_V2"
ENTITY_FULL_UPDATE_V2 = "ENTITY_FULL_UPDATE_V2"
ENTITY_DELETE_V2 = "ENTITY_DELETE_V2"
UNKNOWN_USER = "UNKNOWN"
"""``HookNotification.getUser()`` of a message without a user."""
SOURCE_NAME = "atlas-bridge"

# -- pure: building and decoding envelopes -------------------------------------------------------------


def message_version(version: str = MESSAGE_VERSION) -> dict[str, Any]:
    """``MessageVersion`` as Jackson writes it: trailing zero parts dropped (``1.0.0`` -> ``[1]``).

    >>> message_version()
    {'version': '1.0.0', 'versionParts': [1]}
    >>> message_version("2.0.1")["versionParts"]
    [2, 0, 1]
    """
    parts: list[int] = []
    zeros = 0
    for text in version.split("."):
        part = int(text)
        if part == 0:
            zeros += 1
        else:
            parts.extend([0] * zeros + [part])
            zeros = 0
    return {"version": version, "versionParts": parts}


def hook_notification(
    batch: Mapping[str, Any], *, user: str | None, kind: str = ENTITY_CREATE_V2
) -> dict[str, Any]:
    """``HookNotification.EntityCreateRequestV2`` (or ``EntityUpdateRequestV2``) carrying one batch.

    Atlas's consumer treats both as ``createOrUpdate`` of the ``AtlasEntitiesWithExtInfo``: the same upsert
    by unique attributes as ``POST /v2/entity/bulk``, so delivering a batch twice changes nothing.
    """
    if kind not in (ENTITY_CREATE_V2, ENTITY_FULL_UPDATE_V2):
        msg = f"hook notifications of batches are {ENTITY_CREATE_V2} or {ENTITY_FULL_UPDATE_V2}, not {kind}"
        raise ValueError(msg)
    if not isinstance(batch.get("entities"), list):
        msg = "a batch must be an AtlasEntitiesWithExtInfo dict with an 'entities' list"
        raise TypeError(msg)
    return {"type": kind, "user": user or UNKNOWN_USER, "entities": dict(batch)}


def delete_notification(object_ids: Iterable[Mapping[str, Any]], *, user: str | None) -> dict[str, Any]:
    """``HookNotification.EntityDeleteRequestV2``: delete entities by ``AtlasObjectId`` (``typeName`` and
    ``uniqueAttributes``, or ``guid``), for clean-ups sent the way hooks send them.

    >>> delete_notification([{"typeName": "t", "uniqueAttributes": {"qualifiedName": "q"}}], user="u")["type"]
    'ENTITY_DELETE_V2'
    """
    ids = [dict(o) for o in object_ids]
    if any("typeName" not in o or not ("guid" in o or "uniqueAttributes" in o) for o in ids):
        msg = "each entity to delete needs a typeName and a guid or uniqueAttributes"
        raise ValueError(msg)
    return {"type": ENTITY_DELETE_V2, "user": user or UNKNOWN_USER, "entities": ids}


def _dumps(obj: Any) -> str:
    """Jackson's compact form: no spaces, non-ASCII as is (the bytes on the wire are UTF-8)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def gzip_java(data: bytes) -> bytes:
    """GZIP as ``java.util.zip.GZIPOutputStream`` writes it (zlib level 6, mtime 0, OS 0): Java's bytes."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = compressor.compress(data) + compressor.flush()
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
    return header + body + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)


def _gunzip(data: bytes) -> bytes:
    return zlib.decompress(data, zlib.MAX_WBITS | 16)


def _string_message(text: str, msg_id: str, kind: str, idx: int = 1, count: int = 1) -> dict[str, Any]:
    """``AtlasNotificationStringMessage`` (no source, as Atlas builds it for compressed and split parts)."""
    return {
        "version": message_version(),
        "msgId": msg_id,
        "msgCompressionKind": kind,
        "msgSplitIdx": idx,
        "msgSplitCount": count,
        "message": text,
    }


def notification_messages(
    notification: Mapping[str, Any],
    *,
    created_at_ms: int,
    msg_id: str,
    source_ip: str = "",
    created_by: str = "",
    source: Mapping[str, str] | None = None,
    max_length_bytes: int = DEFAULT_MAX_LENGTH_BYTES,
    compression: bool = True,
) -> list[str]:
    """The Kafka message values for one notification, as ``createNotificationMessages`` makes them.

    One value when the envelope fits in ``max_length_bytes - 512`` UTF-8 bytes; else the GZIP+base64 form
    (``compression``), else that text (or the plain base64 when compression is off) in parts of that
    length. ``msg_id`` names the compressed or split message (Atlas: a UUID and a counter); the rest of
    the output depends on the arguments only, so the same arguments give the same bytes.
    """
    limit = max_length_bytes - ENVELOPE_RESERVE_BYTES
    if limit <= 0:
        msg = f"max_length_bytes must be over {ENVELOPE_RESERVE_BYTES}"
        raise ValueError(msg)
    envelope: dict[str, Any] = {}
    if source:
        envelope["source"] = dict(source)
    envelope.update(
        version=message_version(),
        msgCompressionKind="NONE",
        msgSplitIdx=1,
        msgSplitCount=1,
        msgSourceIP=source_ip,
        msgCreatedBy=created_by,
        msgCreationTime=created_at_ms,
        spooled=False,
        message=dict(notification),
    )
    text = _dumps(envelope)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return [text]
    if compression:
        kind = "GZIP"
        encoded = base64.b64encode(gzip_java(data))
        if len(encoded) <= limit:
            return [_dumps(_string_message(encoded.decode("ascii"), msg_id, kind))]
    else:
        kind = "NONE"
        encoded = base64.b64encode(data)
    count = math.ceil(len(encoded) / limit)
    return [
        _dumps(_string_message(encoded[i * limit : (i + 1) * limit].decode("ascii"), msg_id, kind, i, count))
        for i in range(count)
    ]


def _parse(raw: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (ValueError, UnicodeDecodeError) as e:
        msg = f"not a JSON hook message: {e.__class__.__name__}"
        raise NotificationError(msg) from None
    if not isinstance(value, dict) or not isinstance(value.get("version"), dict):
        msg = "not an Atlas notification envelope (no version)"
        raise NotificationError(msg)
    return value


def _expand(encoded: str, kind: str, msg_id: str | None) -> dict[str, Any]:
    try:
        data = base64.b64decode(encoded.encode("ascii"), validate=True)
        if kind == "GZIP":
            data = _gunzip(data)
    except (ValueError, zlib.error) as e:
        msg = f"message {msg_id}: cannot undo {kind} / base64: {e.__class__.__name__}"
        raise NotificationError(msg, msg_id=msg_id) from None
    return _parse(data)


def decode_messages(values: Iterable[str | bytes]) -> list[dict[str, Any]]:
    """The ``AtlasNotificationMessage`` envelopes in Kafka message values, in order, as Atlas's consumer
    reads them: split parts joined by ``msgId`` (part 0 opens a message), GZIP and base64 undone.

    Raises:
        NotificationError: a value is not an envelope, a part arrives before its first part or out of
            range, or a split message is still incomplete at the end.
    """
    out: list[dict[str, Any]] = []
    pending: dict[str, list[str | None]] = {}
    for raw in values:
        msg = _parse(raw)
        count = int(msg.get("msgSplitCount") or 1)
        if count > 1:
            msg_id = msg.get("msgId")
            idx = int(msg.get("msgSplitIdx", -1))
            if not isinstance(msg_id, str) or not msg_id:
                msg_text = "a split message without msgId"
                raise NotificationError(msg_text)
            if idx == 0:
                pending[msg_id] = [None] * count
            parts = pending.get(msg_id)
            if parts is None:
                msg_text = f"message {msg_id}: part {idx + 1} of {count} before the first part"
                raise NotificationError(msg_text, msg_id=msg_id)
            if not 0 <= idx < len(parts):
                msg_text = f"message {msg_id}: part {idx + 1} of {count} out of range"
                raise NotificationError(msg_text, msg_id=msg_id)
            parts[idx] = str(msg.get("message") or "")
            if any(p is None for p in parts):
                continue
            del pending[msg_id]
            joined = "".join(p for p in parts if p is not None)
            msg = _expand(joined, str(msg.get("msgCompressionKind", "NONE")), msg_id)
        if msg.get("msgCompressionKind") == "GZIP":
            msg = _expand(str(msg.get("message") or ""), "GZIP", msg.get("msgId"))
        out.append(msg)
    if pending:
        first = next(iter(pending))
        msg_text = f"message {first}: split parts missing at the end"
        raise NotificationError(msg_text, msg_id=first)
    return out


def batches_from_messages(values: Iterable[str | bytes]) -> list[dict[str, Any]]:
    """The ``AtlasEntitiesWithExtInfo`` bodies of the create / full-update notifications in ``values``."""
    out = []
    for envelope in decode_messages(values):
        notification = envelope.get("message") or {}
        if notification.get("type") in (ENTITY_CREATE_V2, ENTITY_FULL_UPDATE_V2):
            out.append(dict(notification.get("entities") or {}))
    return out


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def producer_config(settings: Settings) -> dict[str, Any]:
    """kafka-python ``KafkaProducer`` arguments from the ``atlas.kafka.*`` settings (secrets included:
    never log this). Ordering: all acks, one request in flight, so a batch never overtakes another."""
    if not settings.kafka_bootstrap_servers:
        msg = "no Kafka: set atlas.kafka.bootstrap.servers (or ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS)"
        raise ConfigError(msg)
    timeout_ms = int(settings.kafka_request_timeout_s * 1000)
    config: dict[str, Any] = {
        "bootstrap_servers": list(settings.kafka_bootstrap_servers),
        "client_id": SOURCE_NAME,
        "acks": "all",
        "max_in_flight_requests_per_connection": 1,
        "retries": 3,
        "request_timeout_ms": timeout_ms,
        "max_block_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,
        "delivery_timeout_ms": timeout_ms + 1000,
        # A whole message of max.length.bytes plus its envelope must fit one request.
        "max_request_size": max(1_048_576, settings.message_max_length_bytes + 4096),
        "security_protocol": settings.kafka_security_protocol,
    }
    protocol = settings.kafka_security_protocol
    if protocol.startswith("SASL"):
        options: dict[str, str] = {}
        jaas = settings.kafka_sasl_jaas_config.get_secret_value() if settings.kafka_sasl_jaas_config else ""
        for key, value in _JAAS_OPTION.findall(jaas):
            options[key] = re.sub(r"\\(.)", r"\1", value)
        mechanism = settings.kafka_sasl_mechanism or ("GSSAPI" if "Krb5LoginModule" in jaas else "PLAIN")
        config["sasl_mechanism"] = mechanism.upper()
        if config["sasl_mechanism"] == "GSSAPI":
            config["sasl_kerberos_service_name"] = (
                settings.kafka_sasl_kerberos_service_name or options.get("serviceName") or "kafka"
            )
        else:
            # Our own settings (arguments, environment) win over the JAAS line of the file.
            username = settings.kafka_sasl_username or options.get("username")
            password = (
                settings.kafka_sasl_password.get_secret_value()
                if settings.kafka_sasl_password
                else options.get("password")
            )
            if not username or password is None:
                msg = (
                    f"SASL {config['sasl_mechanism']} needs a user and password: "
                    "atlas.kafka.sasl.jaas.config, or ATLAS_BRIDGE_KAFKA_SASL_USERNAME / _PASSWORD"
                )
                raise ConfigError(msg)
            config["sasl_plain_username"] = username
            config["sasl_plain_password"] = password
    if protocol.endswith("SSL"):
        for name, path in (
            ("ssl_cafile", settings.kafka_ssl_cafile),
            ("ssl_certfile", settings.kafka_ssl_certfile),
        ):
            if path is None:
                continue
            if path.suffix.lower() in {".jks", ".p12", ".pfx", ".keystore", ".truststore"}:
                msg = f"{path.name}: Python cannot read Java key stores; give a PEM file (ssl.*.type=PEM)"
                raise ConfigError(msg)
            config[name] = str(path)
        if settings.kafka_ssl_key_password is not None:
            config["ssl_password"] = settings.kafka_ssl_key_password.get_secret_value()
        config["ssl_check_hostname"] = settings.kafka_ssl_check_hostname
    return config


# -- I/O: publishing ------------------------------------------------------------------------------------


def _require_client() -> Callable[..., Any]:
    """kafka-python's producer class, or a :class:`ConfigError` saying how to install it."""
    try:
        from kafka import KafkaProducer
    except ImportError as e:
        msg = "Kafka delivery needs kafka-python: pip install 'atlas-bridge[kafka]'"
        raise ConfigError(msg) from e
    producer: Callable[..., Any] = KafkaProducer
    return producer


def _local_address() -> str:
    """What Atlas's hooks put in ``msgSourceIP`` (``Inet4Address.getLocalHost()``), or "" when unknown."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return ""


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return UNKNOWN_USER


class KafkaPublisher:
    """Publishes Atlas request bodies to the hook topic, one ``HookNotification`` per batch.

    It answers ``post_entities`` like an Atlas client, with ``{"published": <entities>, "messages": n}``
    instead of mutated entities (Atlas applies the message later). Every message carries the same key,
    so all of them (and every part of a split one) land on one partition in the order sent; the producer
    waits for all replicas and keeps one request in flight, so order survives retries. A message the
    brokers do not acknowledge within ``timeout_s`` raises :class:`KafkaUnavailableError`: the caller keeps
    the batch and sends it again later, and since Atlas upserts by unique attributes a batch that did
    arrive after all changes nothing the second time.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        topic: str = "ATLAS_HOOK",
        key: str = SOURCE_NAME,
        kind: str = ENTITY_CREATE_V2,
        user: str | None = None,
        max_length_bytes: int = DEFAULT_MAX_LENGTH_BYTES,
        compression: bool = True,
        timeout_s: float = 30.0,
        producer_factory: Callable[..., Any] | None = None,
    ) -> None:
        self._config = dict(config)
        self.servers = ",".join(self._config.get("bootstrap_servers") or [])
        self.topic = topic
        self.key = key.encode("utf-8")
        self.kind = kind
        self.user = user or _current_user()
        self.max_length_bytes = max_length_bytes
        self.compression = compression
        self.timeout_s = timeout_s
        self._factory = producer_factory
        self._producer: Any = None
        self._lock = threading.Lock()
        self._aborted = False
        self._waiting: set[threading.Event] = set()
        self._waiting_lock = threading.Lock()
        self._source_ip: str | None = None
        self._msg_prefix = str(uuid.uuid4())
        self._msg_counter = 0
        self.messages = 0
        """Kafka messages acknowledged so far (a split notification counts each part)."""
        self.bytes = 0
        """UTF-8 bytes of those messages' values."""
        self.source: Mapping[str, str] | None = None
        """``MessageSource`` of the envelopes (``{"source": name, "version": ...}``); None leaves it out."""

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> KafkaPublisher:
        from atlas_bridge import __version__

        kwargs.setdefault("topic", settings.kafka_topic)
        kwargs.setdefault("key", f"{SOURCE_NAME}@{settings.namespace}")
        kwargs.setdefault("max_length_bytes", settings.message_max_length_bytes)
        kwargs.setdefault("compression", settings.message_compression)
        kwargs.setdefault("timeout_s", settings.kafka_request_timeout_s)
        if kwargs.get("producer_factory") is None:
            _require_client()  # say so now, not once per batch
        publisher = cls(producer_config(settings), **kwargs)
        publisher.source = {"source": SOURCE_NAME, "version": __version__}
        return publisher

    name = "Kafka"
    """How log lines of the sinks call this destination."""

    @property
    def base_url(self) -> str:
        """The destination's name (resume state and reports are kept per destination)."""
        return f"kafka://{self.servers}/{self.topic}"

    def messages_for(self, batch: Mapping[str, Any], *, created_at_ms: int | None = None) -> list[str]:
        """The message values one batch becomes (a new ``msgId`` each call, as Atlas's counter gives)."""
        if self._source_ip is None:
            self._source_ip = _local_address()
        self._msg_counter += 1
        return notification_messages(
            hook_notification(batch, user=self.user, kind=self.kind),
            created_at_ms=int(time.time() * 1000) if created_at_ms is None else created_at_ms,
            msg_id=f"{self._msg_prefix}_{self._msg_counter - 1}",
            source_ip=self._source_ip,
            created_by=self.user,
            source=self.source,
            max_length_bytes=self.max_length_bytes,
            compression=self.compression,
        )

    def post_entities(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Publish one batch and wait until the brokers acknowledge every message of it.

        The client's calls (connecting, sending, waiting) run in a helper thread, so :meth:`abort` frees
        the caller at once even while kafka-python is still looking for a broker.
        """
        if self._aborted:
            raise self._cut()
        values = [m.encode("utf-8") for m in self.messages_for(batch)]
        t0 = time.monotonic()
        outcome: dict[str, Exception | None] = {}
        done = threading.Event()

        def publish() -> None:
            try:
                with self._lock:
                    try:
                        producer = self._get_producer()
                        futures = [producer.send(self.topic, key=self.key, value=v) for v in values]
                        producer.flush(timeout=self.timeout_s)
                        for future in futures:
                            future.get(timeout=max(0.001, self.timeout_s - (time.monotonic() - t0)))
                        outcome["ok"] = None
                    except Exception as e:
                        self._drop_producer()
                        outcome["error"] = e
            finally:
                done.set()

        with self._waiting_lock:
            self._waiting.add(done)
        try:
            threading.Thread(target=publish, name="atlas-bridge-kafka", daemon=True).start()
            # Bounded: each client call above is bounded by timeout_s (bootstrap, metadata, acks).
            done.wait(4 * self.timeout_s + 5)  # set by the thread, or at once by abort()
        finally:
            with self._waiting_lock:
                self._waiting.discard(done)
        error = outcome.get("error")
        if error is not None:
            raise self._error(error, time.monotonic() - t0)
        if "ok" not in outcome:  # cut by abort(), or the client hung past every bound
            raise self._cut()
        self.messages += len(values)
        self.bytes += sum(len(v) for v in values)
        entities = len(batch.get("entities") or []) + len(batch.get("referredEntities") or {})
        return {"published": entities, "messages": len(values)}

    def _cut(self) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"publishing to Kafka at {self.servers} was cut (the process is ending, or the brokers hang)",
            servers=self.servers,
            topic=self.topic,
        )

    def _get_producer(self) -> Any:
        if self._producer is None:
            factory = self._factory
            if factory is None:
                factory = _require_client()
            self._producer = factory(**self._config)
        return self._producer

    def _drop_producer(self) -> None:
        """Forget a producer that failed: the next batch starts a fresh one (buffered messages are dropped,
        their batch is kept by the caller)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=0)
            except Exception as e:
                logger.debug("closing a failed Kafka producer: %s", e.__class__.__name__)

    def _error(self, e: Exception, elapsed: float) -> Exception:
        """Our error for a client error; its text names the brokers and the error class only (no secrets)."""
        if isinstance(e, (ConfigError, AtlasError)):
            return e
        name = e.__class__.__name__
        where = f"Kafka at {self.servers}, topic {self.topic}"
        if "Authentication" in name or "Authorization" in name or "Sasl" in name:
            return KafkaAuthError(f"{where} refused us: {name}", servers=self.servers, topic=self.topic)
        if name in {"MessageSizeTooLargeError", "RecordTooLargeError", "InvalidTopicError"}:
            return AtlasError(f"{where} refused the message: {name}", url=self.base_url)
        return KafkaUnavailableError(
            f"{where} did not acknowledge the message within {self.timeout_s:g}s: {name}",
            servers=self.servers,
            topic=self.topic,
            elapsed_s=elapsed,
        )

    def abort(self) -> None:
        """Cut what is in flight and fail every later batch at once (a job ending must not wait): the
        caller keeps those batches (spool, unsent folder)."""
        self._aborted = True
        with self._waiting_lock:
            waiting = list(self._waiting)
        for event in waiting:
            event.set()
        producer = self._producer
        if producer is not None:
            try:
                producer.close(timeout=0)
            except Exception as e:
                logger.debug("aborting the Kafka producer: %s", e.__class__.__name__)

    def close(self) -> None:
        """Send what is buffered (bounded by ``timeout_s``; at once after :meth:`abort`) and release the
        connection."""
        wait = 0.0 if self._aborted else self.timeout_s
        # A publish cut by abort() may still hold the lock: never wait for it then.
        locked = self._lock.acquire(timeout=wait) if wait else self._lock.acquire(blocking=False)
        try:
            producer, self._producer = self._producer, None
        finally:
            if locked:
                self._lock.release()
        if producer is not None:
            try:
                producer.close(timeout=wait)
            except Exception as e:
                logger.warning("closing the Kafka producer: %s", e.__class__.__name__)
