"""Exception tree of atlas-bridge.

Everything the package raises on purpose derives from one root, so callers can catch it alone::

    AtlasBridgeError
    ├── ConfigError            bad or missing settings; Spark Connect (no JVM) for the hook
    ├── ExtractionError        input that cannot be read at all (a file, not one bad statement)
    │   └── UnsafeInputError   refused untrusted input (XML entities, size limits)
    ├── TypedefError           our typedefs cannot be registered as they are
    ├── NotificationError      a Kafka hook message that cannot be decoded
    ├── FolderBusyError        another process is sending the same folder of batches
    ├── OpenLineageError       an OpenLineage endpoint refused our events, or could not be reached
    └── AtlasError             Atlas answered with an error, or could not be reached
        ├── AtlasAuthError     401 / 403
        │   └── KafkaAuthError     the Kafka brokers refused our credentials or the topic
        ├── AtlasNotFoundError 404
        ├── AtlasConflictError 409
        └── AtlasUnavailableError  connection refused, timeouts, 5xx after retries
            └── KafkaUnavailableError  no Kafka broker acknowledged the message in time

Bad SQL is *not* raised: extractors return it as :class:`atlas_bridge.model.Problem` records so the rest of a
script still yields lineage. Errors carry data (status, Atlas errorCode, file/line) as attributes, and their
messages never include secrets.
"""

from __future__ import annotations


class AtlasBridgeError(Exception):
    """Root of every error atlas-bridge raises on purpose."""


class ConfigError(AtlasBridgeError):
    """Settings are missing, contradictory, or cannot work in this environment."""


class ExtractionError(AtlasBridgeError):
    """A whole input could not be read (unreadable file, unknown format).

    Attributes:
        file: the input's path, when it came from a file.
        line: 1-based line where reading stopped, when known.
        column: 1-based column, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        where = file or "<input>"
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")
        self.file = file
        self.line = line
        self.column = column


class UnsafeInputError(ExtractionError):
    """Untrusted input was refused (entity expansion, external entities, over the size limit)."""


class TypedefError(AtlasBridgeError):
    """Our typedefs are inconsistent, or Atlas holds a version we must not overwrite."""


class AtlasError(AtlasBridgeError):
    """Atlas answered with an error (or did not answer).

    Attributes:
        status_code: HTTP status, or None when no response arrived.
        error_code: Atlas's ``errorCode`` (e.g. ``ATLAS-404-00-007``) when the body had one.
        url: the request URL without credentials or query secrets.
        body: a short, secret-free excerpt of the response body.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_code: str | None = None,
        url: str | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_code = error_code
        self.url = url
        self.body = body


class AtlasAuthError(AtlasError):
    """Atlas refused the credentials (401) or the permission (403)."""


class AtlasNotFoundError(AtlasError):
    """Atlas answered 404: a type, entity or referenced entity does not exist."""


class AtlasConflictError(AtlasError):
    """Atlas answered 409: the thing to create exists already."""


class AtlasUnavailableError(AtlasError):
    """Atlas could not be reached, or kept failing after every retry.

    Attributes:
        attempts: how many attempts were made (0 when unknown).
        elapsed_s: seconds spent on them.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_code: str | None = None,
        url: str | None = None,
        body: str | None = None,
        attempts: int = 0,
        elapsed_s: float = 0.0,
    ) -> None:
        super().__init__(message, status_code=status_code, error_code=error_code, url=url, body=body)
        self.attempts = attempts
        self.elapsed_s = elapsed_s


class KafkaAuthError(AtlasAuthError):
    """The Kafka brokers refused the SASL / TLS credentials, or the right to write the topic.

    Attributes:
        servers: the bootstrap servers (``host:port``, never credentials).
        topic: the topic written to.
    """

    def __init__(self, message: str, *, servers: str = "", topic: str = "") -> None:
        super().__init__(message, url=f"kafka://{servers}/{topic}")
        self.servers = servers
        self.topic = topic


class KafkaUnavailableError(AtlasUnavailableError):
    """No Kafka broker could be reached, or none acknowledged a message within the request timeout.

    Attributes:
        servers: the bootstrap servers (``host:port``, never credentials).
        topic: the topic written to.
    """

    def __init__(self, message: str, *, servers: str = "", topic: str = "", elapsed_s: float = 0.0) -> None:
        super().__init__(message, url=f"kafka://{servers}/{topic}", elapsed_s=elapsed_s)
        self.servers = servers
        self.topic = topic


class NotificationError(AtlasBridgeError):
    """A hook message read from Kafka is not an Atlas notification we can decode (or a split part is missing).

    Attributes:
        msg_id: the ``msgId`` of the split or compressed message, when there is one.
    """

    def __init__(self, message: str, *, msg_id: str | None = None) -> None:
        super().__init__(message)
        self.msg_id = msg_id


class FolderBusyError(AtlasBridgeError):
    """Another process (or thread) is sending the same folder of batches right now.

    Attributes:
        folder: the folder being sent.
    """

    def __init__(self, message: str, *, folder: str) -> None:
        super().__init__(message)
        self.folder = folder


class OpenLineageError(AtlasBridgeError):
    """An OpenLineage endpoint (``POST /api/v1/lineage``) refused our events or kept failing.

    Attributes:
        status_code: the last HTTP status, or None when no response arrived.
        url: the endpoint, without credentials.
        attempts: how many attempts were made.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, url: str = "", attempts: int = 0
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.url = url
        self.attempts = attempts
