"""The pipeline spec: one YAML file per pipeline, parsed once into typed, frozen config.

The loading part lives here (source, topics, decoder, event time, raw layer, limits, policies);
what follows the load (transforms, outputs, expectations, schedule) in pipelines.config.steps. Every value is
checked when the file is loaded, and errors name ``file:key.path``. See docs/pipelines.md and
docs/spec-reference.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kafkalog.client.security import PLAINTEXT, ClientSecurity
from pipelines.addresses import is_http_address
from pipelines.config.loader import LOADER
from pipelines.config.steps import Output, Schedule, Transform, check_graph
from pipelines.config.tables import Tables, check_table_name
from pipelines.errors import SpecError

FIELD_TYPES = ("string", "long", "int", "double", "float", "boolean", "timestamp", "binary")
"""Types a decoded field may have (Arrow: utf8, int64, int32, float64, float32, bool, timestamp[us, UTC], binary)."""

METADATA_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "broker",
    "timestamp",
    "timestamp_type",
    "event_time",
    "key",
    "headers",
    "tombstone",
)
"""Columns every raw row carries besides the decoded fields (and the dt/hour partition columns), in
their order (pipelines.executor.rows.row_schema). ``tombstone``: the message has no value (on a
compacted topic, the delete of its key)."""

PARTITION_COLUMNS = ("dt", "hour")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _fail(key: str, message: str) -> SpecError:
    return SpecError(f"{key}: {message}")


LISTENER_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""The security protocols a Kafka listener is named by (``PLAINTEXT://host:port``)."""


def _broker_version(given: str | float) -> str:
    """``source.broker_version`` checked: "0.9" (also 0.9.0 and 0.9.0.1, or unquoted 0.9 in YAML);
    a newer version is refused with what to do instead, since it would only be ignored."""
    text = str(given).strip()
    if text in ("0.9", "0.9.0", "0.9.0.0", "0.9.0.1"):
        return "0.9"
    parts = text.split(".")
    if all(p.isdigit() for p in parts) and (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0) >= (0, 10):
        raise _fail(
            "broker_version",
            f"leave it out for Kafka {text}: brokers from 0.10 on (4.x and kafkalog too) are asked which "
            'versions they speak; only "0.9" is needed, for Apache Kafka 0.9, which cannot be asked',
        )
    hint = " (a YAML number: 0.10 reads as 0.1; quote a version)" if isinstance(given, float) else ""
    raise _fail(
        "broker_version", f'must be "0.9" (for Apache Kafka 0.9) or left out (any newer broker), not {given!r}{hint}'
    )


@dataclass(frozen=True, slots=True)
class Source:
    """Where the messages come from: a kafkalog (or Kafka 0.9) cluster, named by bootstrap brokers or
    by the ZooKeeper it is registered in (exactly one of ``bootstrap`` and ``zookeeper``)."""

    bootstrap: tuple[str, ...] | None = None
    """``host:port`` of one or more brokers (a list, or "h1:p1,h2:p2"); the rest of the cluster is
    discovered from them. Required unless ``zookeeper`` is given."""
    zookeeper: str | None = None
    """Instead of ``bootstrap``: the ZooKeeper the cluster is registered in,
    ``host:port[,host:port...][/chroot]``. Topics, partitions and the broker of each are planned from
    the registry (a ``topic_pattern`` matches the registered topics); tasks read from the brokers
    registered when the run planned, and ask ZooKeeper only if none of them answers."""
    broker_version: str | float | None = None
    """Set "0.9" for an Apache Kafka 0.9 broker (it cannot answer ApiVersions). Leave it out for
    everything newer (Kafka 0.10 to 4.x, kafkalog): the versions are asked of the broker."""
    request_timeout_ms: int = 30_000
    """How long one broker request may take."""
    fetch_max_bytes: int = 4 * 1024 * 1024
    """Bytes asked for per fetch request and partition (grown automatically for larger messages)."""
    retry_ms: int = 60_000
    """How long a task keeps retrying a broker that is down before it fails (the attempt is then retried by Spark)."""
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    """read_committed: only the records of committed transactions become rows; a split ends at the
    last stable offset (an open transaction holds it back), aborted records and transaction markers
    are skipped and counted (docs/pipelines.md, "Transactions"). read_uncommitted: every data record
    the log holds, up to its end, aborted ones included (what Kafka's consumers read by default);
    markers are skipped and counted either way. Without transactions in the topic, both load the
    same rows."""
    security: ClientSecurity = PLAINTEXT
    """TLS and a SASL login for a secured cluster (docs/security.md): ``{protocol: SASL_SSL, mechanism:
    SCRAM-SHA-512, username: loader, password: ${env:LOADER_PASSWORD}, ca_file: /etc/kafka/ca.pem}``.
    The password only from the environment: the loader refuses one written in the file."""

    def __post_init__(self) -> None:
        if self.bootstrap is None and self.zookeeper is None:
            raise _fail(
                "bootstrap",
                "required key is missing: give the brokers (bootstrap: host:port, ...) or the ZooKeeper they "
                "are registered in (zookeeper: host:port[,host:port...][/chroot])",
            )
        if self.bootstrap is not None and self.zookeeper is not None:
            raise _fail("zookeeper", "give either bootstrap or zookeeper, not both")
        if self.zookeeper is not None:
            from kafkalog.client import check_connect_string  # noqa: PLC0415 - the client only for ZooKeeper sources
            from kafkalog.errors import RegistryError  # noqa: PLC0415

            try:
                object.__setattr__(self, "zookeeper", check_connect_string(self.zookeeper))
            except RegistryError as exc:
                raise _fail("zookeeper", str(exc)) from exc
        if self.bootstrap is not None:
            self._split_bootstrap(self.bootstrap)
        if self.broker_version is not None:
            object.__setattr__(self, "broker_version", _broker_version(self.broker_version))
        for key in ("request_timeout_ms", "fetch_max_bytes", "retry_ms"):
            if getattr(self, key) <= 0:
                raise _fail(key, "must be positive")

    def _split_bootstrap(self, bootstrap: tuple[str, ...]) -> None:
        # "a:1,b:2" is the usual way to write a broker list: accept it as well as a YAML list
        # errors number YAML list items, or the comma-separated parts of a single string
        split = []
        for i, item in enumerate(bootstrap):
            parts = [p.strip() for p in item.split(",")]
            for j, part in enumerate(parts):
                if not part:
                    continue
                where = f"bootstrap[{i if len(bootstrap) > 1 else j}]"
                address = self._without_listener_name(part, where)
                host, sep, port = address.rpartition(":")
                if not sep or not host or not port.isdigit() or "/" in host:
                    raise _fail(where, f"{address!r} is not host:port")
                split.append(address)
        if not split:
            raise _fail("bootstrap", "at least one host:port is needed")
        object.__setattr__(self, "bootstrap", tuple(split))

    @property
    def assumed_version(self) -> str | None:
        """The broker version the clients assume instead of asking: "0.9" or None (``broker_version``
        as checked: a YAML number is made the same string)."""
        return None if self.broker_version is None else str(self.broker_version)

    def _without_listener_name(self, address: str, where: str) -> str:
        """``address`` without a Kafka listener's ``PROTOCOL://`` (as a broker's ``listeners``
        write it: a Kafka user copies it from there), which must be the source's own protocol."""
        scheme, sep, rest = address.partition("://")
        if not sep:
            return address
        if scheme.upper() not in LISTENER_PROTOCOLS:
            raise _fail(
                where,
                f"{address!r} is not host:port (a listener is taken only by its protocol's name, "
                f"{', '.join(f'{p}://' for p in LISTENER_PROTOCOLS)}: give the host:port of the listener)",
            )
        if scheme.upper() != self.security.protocol:
            raise _fail(
                where,
                f"{address!r} is a {scheme.upper()} listener, but this source's security.protocol is "
                f"{self.security.protocol}: give the address of a {self.security.protocol} listener, or set "
                f"security.protocol: {scheme.upper()}",
            )
        return rest

    @property
    def cluster(self) -> str:
        """The cluster as errors name it: its bootstrap brokers, or ``ZooKeeper at <connect string>``."""
        if self.zookeeper is not None:
            return f"ZooKeeper at {self.zookeeper}"
        return ",".join(self.bootstrap or ())


@dataclass(frozen=True, slots=True)
class CsvOptions:
    """How a ``format: csv`` message is split: one record per message, fields in schema order."""

    delimiter: str = ","
    """One character between fields."""
    quote: str = '"'
    """One character that quotes a field."""

    def __post_init__(self) -> None:
        for key, value in (("delimiter", self.delimiter), ("quote", self.quote)):
            if len(value) != 1:
                raise _fail(key, "must be one character")
            if not value.isascii():  # Arrow's CSV parser takes one byte; "é" is two in UTF-8
                raise _fail(key, f"must be an ASCII character, not {value!r}")


REGISTRY_FORMATS = ("avro", "protobuf", "json_schema")
"""Formats whose values are framed with a schema registry's schema id (kafkalog.schemas.wire)."""
_FULL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True, slots=True)
class RegistryTls:
    """How the schema registry's https:// addresses are checked, and the client certificate shown."""

    ca_file: Path | None = None
    """The authorities the registry's certificate must come from (None: the system's)."""
    certificate: Path | None = None
    """A client certificate (PEM), for a registry that asks for one."""
    key: Path | None = None
    """The client certificate's key (PEM, not encrypted)."""
    verify: bool = True
    """Check the registry's certificate and name (turn off only for a test registry)."""

    def __post_init__(self) -> None:
        if (self.certificate is None) != (self.key is None):
            raise _fail("certificate", "a client certificate and its key go together")


@dataclass(frozen=True, slots=True)
class Registry:
    """The schema registry a value's schema id is looked up in (Confluent's REST API: kafkalog's,
    Confluent's, Karapace, Redpanda's), asked by the driver once per run, never by a task."""

    urls: tuple[str, ...]
    """One or more http(s)://host:port addresses of the same registry, tried in order: the next
    when one does not answer or answers 5xx."""
    username: str | None = None
    """A basic-auth user."""
    password: str | None = field(default=None, repr=False)
    """Its password: only as ``${env:NAME}`` (the loader refuses one written in the file)."""
    tls: RegistryTls = field(default_factory=RegistryTls)
    """For https:// addresses: the authorities, a client certificate, whether to check."""
    subject_strategy: Literal["topic", "record", "topic_record"] = "topic"
    """Which subject holds a topic's value schemas, as the producers' serializers named it: topic
    (``<topic>-value``), record (``<record>``), topic_record (``<topic>-<record>``)."""
    record: str | None = None
    """The record's (Avro) or message's (Protobuf) full name, such as ``shop.Order``: required by
    the record and topic_record strategies. Protobuf: the message values are read as, under any
    strategy (without it, the schema's first message)."""
    version: int | Literal["latest"] = "latest"
    """The subject version whose schema is the reader schema (the raw layer's columns): latest,
    or a version number to pin it. Values written with any version of the subject are read into
    it."""
    timeout_ms: int = 10_000
    """How long one request to the registry may take."""

    def __post_init__(self) -> None:
        if not self.urls:
            raise _fail("urls", "at least one http(s)://host:port address of the registry is needed")
        for i, url in enumerate(self.urls):
            if not is_http_address(url):
                shown = url.rpartition("@")[2]  # never a user's credentials in an error
                raise _fail(f"urls[{i}]", f"{shown!r} is not an http:// or https:// address (http://host:8081)")
            if "@" in url.partition("://")[2].partition("/")[0]:
                # credentials in an address would be shown in errors and shipped to the tasks
                raise _fail(
                    f"urls[{i}]", "an address may not carry credentials (user:password@): use username and password"
                )
        if (self.username is None) != (self.password is None):
            raise _fail("username", "basic auth needs a username and a password (the password from the environment)")
        if self.subject_strategy in ("record", "topic_record") and self.record is None:
            raise _fail("record", f"the {self.subject_strategy} strategy needs the record's full name (shop.Order)")
        if self.record is not None and not _FULL_NAME.match(self.record):
            raise _fail("record", f"{self.record!r} is not a full name (letters, digits, _ and dots: shop.Order)")
        if self.version != "latest" and (isinstance(self.version, bool) or self.version < 1):
            raise _fail("version", f"must be latest or a version number (1 or more), not {self.version!r}")
        if self.timeout_ms <= 0:
            raise _fail("timeout_ms", "must be positive")

    def subject(self, topic: str, *, key: bool = False) -> str:
        """The subject of ``topic``'s value (or key) schemas under the strategy."""
        if self.subject_strategy == "topic" or key:
            return f"{topic}-{'key' if key else 'value'}"
        if self.subject_strategy == "record":
            return str(self.record)
        return f"{topic}-{self.record}"


@dataclass(frozen=True, slots=True)
class KeyDecoder:
    """How a message key becomes a column besides the raw ``key`` bytes (which every row keeps)."""

    format: Literal["raw", "string", "json", "avro"] = "raw"
    """raw (the default: only the ``key`` bytes), string (UTF-8 text), json (an object: ``schema``
    gives its fields), avro (framed with a schema id of the subject ``<topic>-key``, in the value
    decoder's registry unless ``registry`` names another)."""
    schema: dict[str, str] = field(default_factory=dict)
    """json: field name → type, as the value decoder's schema."""
    registry: Registry | None = None
    """avro: the registry of the key schemas (default: the value decoder's)."""

    def __post_init__(self) -> None:
        if self.format == "json":
            if not self.schema:
                raise _fail("schema", "the json key decoder needs a schema (field: type)")
            _check_fields(self.schema, reserved=frozenset())
        elif self.schema:
            raise _fail("schema", f"the {self.format} key decoder takes no schema")
        if self.registry is not None and self.format != "avro":
            raise _fail("registry", f"the {self.format} key decoder reads no registry")

    @property
    def column(self) -> str | None:
        """The decoded key's column (None for raw keys)."""
        return None if self.format == "raw" else "key_decoded"


def _check_fields(schema: dict[str, str], reserved: frozenset[str]) -> None:
    """Field names and kinds of a declared schema."""
    lowered: set[str] = set()
    for name, kind in schema.items():
        if name.lower() in lowered:
            raise _fail(f"schema.{name}", "differs from another field only in case (Spark treats them as one)")
        lowered.add(name.lower())
        if not _NAME.match(name):
            raise _fail(f"schema.{name}", "a field name must be letters, digits and _ (not starting with a digit)")
        if name.lower() in reserved:
            raise _fail(f"schema.{name}", "clashes with a column every raw row has; rename it")
        if kind not in FIELD_TYPES:
            raise _fail(f"schema.{name}", f"type must be one of {', '.join(FIELD_TYPES)}, not {kind!r}")


RESERVED_COLUMNS = frozenset(c.lower() for c in (*METADATA_COLUMNS, *PARTITION_COLUMNS, "value", "key_decoded"))
"""Names no decoded field may take: the raw row's own columns."""


@dataclass(frozen=True, slots=True)
class Decoder:
    """How a message value becomes columns. json and csv need a schema (field: type, in order);
    avro, protobuf and json_schema take their columns from the schema the values were written
    with (a schema registry's, or for avro a schema file); connect_json from a declared schema."""

    format: Literal["json", "csv", "raw", "avro", "protobuf", "json_schema", "connect_json"]
    """json (one object per message), csv (one record per message), raw (the value as bytes),
    avro / protobuf / json_schema (framed with a registry's schema id, as Confluent's serializers
    write them; avro also from a ``schema_file``), connect_json (Kafka Connect's JsonConverter
    envelope ``{"schema": ..., "payload": ...}``). docs/pipelines.md, "Schema'd payloads"."""
    schema: dict[str, str] = field(default_factory=dict)
    """json/csv (and connect_json, or its ``schema_file``): field name → type (string, long, int,
    double, float, boolean, timestamp, binary), in column order."""
    required: tuple[str, ...] = ()
    """Fields that may not be null or absent: a message without one is a bad record (a tombstone, a
    message without a value, is a row with every field null: docs/pipelines.md)."""
    csv: CsvOptions = field(default_factory=CsvOptions)
    """csv only: how records are split into fields."""
    registry: Registry | None = None
    """avro, protobuf, json_schema: the schema registry the values' schema ids are looked up in."""
    schema_file: Path | None = None
    """avro without a registry: an .avsc file, the schema every value was written with and is
    read with (values are then plain Avro binary, unless ``framed``). connect_json: a file holding
    the Connect schema (the ``schema`` of an envelope), instead of ``schema``."""
    framed: bool = False
    """avro with a ``schema_file``: the values carry the 5-byte schema-id frame anyway (the id is
    not looked up: the file's schema reads them all)."""
    key_decoder: KeyDecoder = field(default_factory=KeyDecoder)
    """How keys are decoded into a ``key_decoded`` column (default: not at all; ``key`` holds the bytes)."""

    def __post_init__(self) -> None:
        fmt = self.format
        if fmt == "raw":
            if self.schema:
                raise _fail("schema", "the raw decoder keeps the value as bytes: it takes no schema")
        elif fmt in ("json", "csv"):
            if not self.schema:
                raise _fail("schema", f"the {fmt} decoder needs a schema (field: type)")
        elif fmt == "connect_json":
            if bool(self.schema) == (self.schema_file is not None):
                raise _fail(
                    "schema",
                    "the connect_json decoder needs the columns: a schema (field: type) or a schema_file "
                    "holding the Connect schema, exactly one",
                )
        elif self.schema:
            raise _fail("schema", f"the {fmt} decoder takes its columns from the values' schema, not from schema")
        if fmt == "avro" and (self.registry is None) == (self.schema_file is None):
            raise _fail("registry", "the avro decoder needs a registry or a schema_file (exactly one)")
        if fmt in ("json_schema", "protobuf") and self.registry is None:
            raise _fail("registry", f"the {fmt} decoder needs the schema registry (registry: urls: ...)")
        if self.registry is not None and fmt not in REGISTRY_FORMATS:
            raise _fail("registry", f"the {fmt} decoder reads no registry")
        if self.schema_file is not None and fmt not in ("avro", "connect_json"):
            raise _fail("schema_file", f"the {fmt} decoder reads no schema file")
        if self.framed and not (fmt == "avro" and self.schema_file is not None):
            raise _fail("framed", "only for avro with a schema_file (registry values are always framed)")
        if self.key_decoder.format == "avro" and self.key_decoder.registry is None and self.registry is None:
            raise _fail("key_decoder.registry", "avro keys need a registry (here, or the value decoder's)")
        _check_fields(self.schema, RESERVED_COLUMNS)
        if self.declares_columns:
            for i, name in enumerate(self.required):
                if name not in self.schema:
                    raise _fail(f"required[{i}]", f"{name!r} is not a field of the schema")

    @property
    def declares_columns(self) -> bool:
        """The columns are the file's ``schema`` (json, csv, connect_json with ``schema``), known
        without reading any schema; otherwise they come from the values' schema, resolved per run
        (pipelines.schemas)."""
        return self.format in ("json", "csv", "raw") or (self.format == "connect_json" and bool(self.schema))

    @property
    def key_registry(self) -> Registry | None:
        """The registry of the key schemas (avro keys)."""
        if self.key_decoder.format != "avro":
            return None
        return self.key_decoder.registry or self.registry

    def settings(self) -> dict[str, Any]:
        """The decoder as JSON-ready data for the tasks (``from_settings`` reads it back), without the
        registry's credentials: no task asks the registry."""
        data = asdict(self)
        for registry in (data["registry"], data["key_decoder"]["registry"]):
            if registry is not None:
                registry.update(username=None, password=None)
        return json.loads(json.dumps(data, default=str))  # type: ignore[no-any-return]

    @classmethod
    def from_settings(cls, data: dict[str, Any]) -> Decoder:
        """The Decoder ``settings`` made data of."""

        def registry(given: dict[str, Any] | None) -> Registry | None:
            if given is None:
                return None
            tls = given["tls"]
            paths = {k: None if tls[k] is None else Path(tls[k]) for k in ("ca_file", "certificate", "key")}
            return Registry(**{**given, "urls": tuple(given["urls"]), "tls": RegistryTls(**{**tls, **paths})})

        key = data.get("key_decoder") or {}
        return cls(**{
            **data,
            "required": tuple(data.get("required", ())),
            "csv": CsvOptions(**data.get("csv", {})),
            "registry": registry(data.get("registry")),
            "schema_file": None if data.get("schema_file") is None else Path(data["schema_file"]),
            "key_decoder": KeyDecoder(**{**key, "registry": registry(key.get("registry"))}),
        })  # fmt: skip


@dataclass(frozen=True, slots=True)
class EventTime:
    """Which time decides a row's dt=/hour= partition."""

    field: str | None = None
    """A decoded field; None uses the message timestamp."""
    format: str = "iso8601"
    """iso8601 | epoch_millis | epoch_seconds | a strptime pattern such as "%Y-%m-%d %H:%M:%S"."""
    timezone: str = "UTC"
    """The zone of the dt/hour partitions, and of event times in string fields that carry no
    offset. (A field declared ``timestamp`` is parsed by the decoder, where a naive time is UTC.)"""

    def __post_init__(self) -> None:
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise _fail("timezone", f"unknown time zone {self.timezone!r}") from exc
        if self.format not in ("iso8601", "epoch_millis", "epoch_seconds") and "%" not in self.format:
            raise _fail(
                "format", f"must be iso8601, epoch_millis, epoch_seconds or a strptime pattern, not {self.format!r}"
            )


@dataclass(frozen=True, slots=True)
class RawLayer:
    """Where loaded rows land: ``<path>/dt=YYYY-MM-DD/hour=HH/*.parquet``, with the pipeline's
    state (plans, manifests, staging) under ``<path>/_pipeline/``."""

    path: str
    """A local path, file://, hdfs://namenode:8020/..., or any scheme Spark's Hadoop has."""
    format: Literal["parquet"] = "parquet"
    """The file format of the raw layer."""
    compression: Literal["snappy", "zstd", "gzip", "none"] = "snappy"
    """Parquet compression codec."""
    webhdfs_url: str | None = None
    """For hdfs:// paths: the NameNode's WebHDFS address (http://host:9870), used by tools without Spark;
    with HA NameNodes, each one's, separated by ``;`` (tried in turn)."""
    writer: Literal["auto", "tasks", "spark"] = "auto"
    """Who writes the staged Parquet files: ``tasks`` (each task writes its own split with Arrow,
    no row crosses into the JVM: the fast path, for paths every executor and the driver can open
    as local files), ``spark`` (Spark's partitioned writer: any filesystem Spark has). ``auto``:
    tasks for local paths and file://, spark otherwise."""

    def __post_init__(self) -> None:
        if not self.path:
            raise _fail("path", "must not be empty")
        for address in self.webhdfs_url.split(";") if self.webhdfs_url is not None else ():
            if not is_http_address(address):
                shown = address.rpartition("@")[2]  # never a user's credentials in an error
                raise _fail(
                    "webhdfs_url",
                    f"{shown!r} is not an http:// or https:// address of a NameNode (http://namenode:9870; "
                    "several, for HA, separated by ';')",
                )
        if self.writer == "tasks" and not self.is_local:
            raise _fail(
                "writer",
                f"tasks write only to local paths or file:// (a shared mount on a cluster), not {self.path}; "
                "use spark or auto",
            )

    @property
    def is_local(self) -> bool:
        """The path is a local path or a file:// URL (on a cluster: a mount every node shares)."""
        return "://" not in self.path or self.path.startswith("file:")

    @property
    def tasks_write(self) -> bool:
        return self.writer == "tasks" or (self.writer == "auto" and self.is_local)


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps per split and run, so one run stays bounded (the rest waits for the next run)."""

    max_messages_per_split: int | None = None
    """At most this many messages per split and run."""
    max_bytes_per_split: int | None = None
    """Approximate: the plan converts it to messages with the split's average message size."""

    def __post_init__(self) -> None:
        for key in ("max_messages_per_split", "max_bytes_per_split"):
            value = getattr(self, key)
            if value is not None and value <= 0:
                raise _fail(key, "must be positive")


@dataclass(frozen=True, slots=True)
class BadRecords:
    """What happens to a message that cannot be decoded."""

    policy: Literal["fail", "quarantine"] = "fail"
    """fail: the run fails at the first bad message; quarantine: bad messages are kept aside with
    their bytes and reason."""
    max_share: float = 0.01
    """quarantine only: the run fails if more than this share of a split's messages are bad."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_share <= 1.0:
            raise _fail("max_share", "must be between 0 and 1")


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """A pipeline: what to load from where, and how."""

    name: str
    """The pipeline's name: letters, digits, '_', '.', '-' (DAG ids, run records and output tags use it)."""
    source: Source
    """The cluster to read from: its brokers, or the ZooKeeper it is registered in."""
    raw: RawLayer
    """Where loaded rows land, with the pipeline's state beside them."""
    decoder: Decoder
    """How message values become columns."""
    topics: tuple[str, ...] = ()
    """The topics to load (or ``topic_pattern``; exactly one of the two)."""
    topic_pattern: str | None = None
    """A regular expression matched against whole topic names (instead of ``topics``)."""
    event_time: EventTime = field(default_factory=EventTime)
    """Which time decides a row's dt/hour partition."""
    limits: Limits = field(default_factory=Limits)
    """Caps per split and run."""
    on_offset_out_of_range: Literal["fail", "earliest", "latest"] = "fail"
    """When offsets a split needs were deleted by retention: fail (default), or skip to the earliest
    (or latest) offset and record the lost range in the manifest."""
    new_split_start: Literal["earliest", "latest"] = "earliest"
    """Where a split no committed manifest knows (a new topic or partition) starts."""
    bad_records: BadRecords = field(default_factory=BadRecords)
    """What happens to messages that cannot be decoded."""
    description: str = ""
    """Free text, shown in Airflow and status."""
    transforms: tuple[Transform, ...] = ()
    """Spark SQL steps over the raw rows of the partitions a run touched (see docs/transforms.md)."""
    outputs: tuple[Output, ...] = ()
    """Warehouse tables: a step's rows, validated by expectations, overwritten per partition."""
    schedule: Schedule = field(default_factory=Schedule)
    """How Airflow runs the pipeline."""
    tables: Tables = field(default_factory=Tables)
    """Where readers find the raw layer and the outputs by name (a Hive metastore; docs/tables.md)."""

    def __post_init__(self) -> None:
        if not re.match(r"^[A-Za-z0-9_.-]+$", self.name):
            raise _fail("name", "letters, digits, '_', '.' and '-' only")
        if bool(self.topics) == (self.topic_pattern is not None):
            raise _fail("topics", "give either topics or topic_pattern (exactly one)")
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise _fail("topic_pattern", f"not a valid regular expression: {exc}") from exc
        field_name = self.event_time.field
        if field_name is not None and self.decoder.declares_columns:  # else checked once the schema is read
            kind = self.decoder.schema.get(field_name)
            if kind is None:
                raise _fail("event_time.field", f"{field_name!r} is not a field of decoder.schema")
            if kind not in ("string", "long", "int", "timestamp", "double"):
                raise _fail("event_time.field", f"{field_name!r} is a {kind}: it cannot hold a time")
            fmt = self.event_time.format
            numeric_format = fmt in ("epoch_millis", "epoch_seconds")
            if kind in ("long", "int", "double") and not numeric_format:
                raise _fail("event_time.format", f"{field_name!r} is a number: use epoch_millis or epoch_seconds")
            if kind == "string" and numeric_format:
                raise _fail("event_time.format", f"{field_name!r} is a string: use iso8601 or a strptime pattern")

        check_graph(self.transforms, self.outputs)
        self._check_output_paths()
        self._check_tables()

    @property
    def raw_table(self) -> str:
        """The raw layer's table name in the metastore (without the database)."""
        if self.tables.raw is not None:
            return self.tables.raw
        return re.sub(r"[.-]", "_", self.name.lower()) + "_raw"

    def _check_tables(self) -> None:
        if self.tables.metastore == "none":
            return
        if self.tables.metastore == "embedded" and not self.raw.is_local:
            raise _fail(
                "tables.metastore",
                f"the embedded metastore is a Derby database beside the pipeline's state, which needs a local raw "
                f"layer (not {self.raw.path}): name a Hive metastore service (thrift://host:9083) or none",
            )
        if self.tables.raw is None:
            try:
                check_table_name("tables.raw", self.raw_table)
            except SpecError as exc:
                raise _fail("tables.raw", f"the default name {self.raw_table!r} cannot be a table's: give one") from exc
        names = {self.raw_table: "tables.raw"}
        for i, output in enumerate(self.outputs):
            other = names.get(output.table_name)
            if other is not None:
                raise _fail(f"outputs[{i}].table", f"{output.table_name!r} is already the table of {other}")
            names[output.table_name] = f"outputs[{i}]"
            if output.history is not None:
                other = names.get(output.history)
                if other is not None:
                    raise _fail(f"outputs[{i}].history", f"{output.history!r} is already the table of {other}")
                names[output.history] = f"outputs[{i}].history"

    def _check_output_paths(self) -> None:
        """An output must not live inside the raw layer (publishing moves whole partition
        directories) nor share a directory with another output (their staging would mix)."""

        def norm(path: str) -> str:
            path = path[len("file://") :] if path.startswith("file://") else path
            path = path[len("file:") :] if path.startswith("file:") else path
            return path.rstrip("/") + "/"

        raw = norm(self.raw.path)
        seen: dict[str, int] = {}
        for i, output in enumerate(self.outputs):
            here = norm(output.path)
            if here.startswith(raw) or raw.startswith(here):
                raise _fail(f"outputs[{i}].path", f"{output.path} overlaps the raw layer {self.raw.path}")
            for other, j in seen.items():
                if here.startswith(other) or other.startswith(here):
                    raise _fail(f"outputs[{i}].path", f"{output.path} overlaps outputs[{j}].path")
            seen[here] = i

    def webhdfs_url_for(self, path: str) -> str | None:
        """The WebHDFS address the tools use for ``path`` without Spark: ``raw.webhdfs_url`` when
        ``path`` is on the raw layer's cluster (same scheme and NameNode), as outputs are in
        practice; None otherwise (local paths need none)."""
        raw = self.raw.path
        if "://" not in path or "://" not in raw:
            return None

        def cluster(url: str) -> str:
            scheme, _, rest = url.partition("://")
            return f"{scheme}://{rest.split('/', 1)[0]}"

        return self.raw.webhdfs_url if cluster(path) == cluster(raw) else None

    def fingerprint(self) -> str:
        """A short hash of everything that shapes the output (stored in plans: a plan made under a
        different spec is reported, since its rows would have another shape)."""
        decoder = asdict(self.decoder)
        decoder["schema"] = list(self.decoder.schema.items())  # order matters: keep it out of sort_keys
        for key, default in (("registry", None), ("schema_file", None), ("framed", False)):
            if decoder[key] == default:  # left out unless set: the fingerprints of earlier files stay
                del decoder[key]
        if decoder["key_decoder"]["format"] == "raw":
            del decoder["key_decoder"]
        for registry in (decoder.get("registry"), decoder.get("key_decoder", {}).get("registry")):
            if registry is not None:  # where the registry is and how it is reached shape no row
                for key in ("urls", "username", "password", "tls", "timeout_ms"):
                    del registry[key]
        raw = {"path": self.raw.path, "format": self.raw.format, "compression": self.raw.compression}
        shaping = {"decoder": decoder, "event_time": asdict(self.event_time), "raw": raw}
        return hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_spec(path: str | Path) -> PipelineSpec:
    """Read and validate the pipeline YAML at ``path``."""
    return LOADER.load(PipelineSpec, path)
