"""A client of a schema registry's REST API (Confluent's, as kafkalog's, Karapace and Redpanda's serve it):
the three reads a load needs, over the stdlib's urllib.

Role: the driver's only way to the registry. It asks for a subject's versions, one version, and a
schema by id; tries the registry's addresses in order, going on to the next when one does not
answer (a connection error, a timeout) or answers 5xx; logs in with basic auth; checks https://
certificates as ``decoder.registry.tls`` says. Any other answer (a 4xx: an unknown subject, a bad
version) is the registry's word and is not retried elsewhere.

Invariants: answers are untrusted: bounded in size (``MAX_RESPONSE_BYTES``), parsed as JSON and
checked for the fields used; every failure is a SchemaRegistryError that names the address and the
request and says the first cause in one line, never the password.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pipelines.config.pipeline import Registry
from pipelines.errors import SchemaRegistryError

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""The most an answer may hold (a schema of many thousand fields is well below it)."""
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry holds it: its global id, type (AVRO, PROTOBUF or JSON), text and
    references; ``subject`` and ``version`` when it was read as a subject's version."""

    id: int
    schema_type: str
    schema: str
    references: tuple[dict[str, Any], ...] = ()
    subject: str | None = None
    version: int | None = None


class _Unanswered(Exception):
    """This address did not answer usefully (try the next one); the message is the cause."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 30x is answered as the error it is: a registry's answers are never redirects to follow
    (following one would send the credentials to another origin)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class RegistryClient:
    """Reads from one registry (its addresses are copies of it). Not thread-safe; one per run."""

    def __init__(self, registry: Registry, *, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.registry = registry
        self.max_response_bytes = max_response_bytes
        self._context = _tls_context(registry) if any(u.startswith("https:") for u in registry.urls) else None
        self._headers = {"Accept": ACCEPT}
        # no redirects: urllib would carry the Authorization header to wherever a 30x points
        self._opener = urllib.request.build_opener(_NoRedirects(), urllib.request.HTTPSHandler(context=self._context))
        if registry.username is not None and registry.password is not None:
            token = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"

    @property
    def name(self) -> str:
        """The registry as errors name it: its addresses."""
        return ", ".join(self.registry.urls)

    def versions(self, subject: str, *, deleted: bool = True) -> list[int]:
        """The subject's version numbers, oldest first (``deleted``: soft-deleted ones too, whose
        schemas values may still have been written with)."""
        path = f"/subjects/{quote(subject, safe='')}/versions" + ("?deleted=true" if deleted else "")
        answer = self._get(path)
        if not isinstance(answer, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in answer):
            raise self._malformed(path, "a list of version numbers")
        return sorted(answer)

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        """One version of the subject (``latest`` or a number; a soft-deleted one too)."""
        path = f"/subjects/{quote(subject, safe='')}/versions/{quote(str(version), safe='')}?deleted=true"
        answer = self._get(path)
        schema = self._schema(path, answer)
        number = answer.get("version")
        if not isinstance(number, int) or isinstance(number, bool):
            raise self._malformed(path, "a version number")
        return RegisteredSchema(schema.id, schema.schema_type, schema.schema, schema.references, subject, number)

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> RegisteredSchema:
        """The schema of global id ``schema_id`` (``subject``: where it is looked for, as the
        serializers ask)."""
        path = f"/schemas/ids/{schema_id}" + ("" if subject is None else f"?subject={quote(subject, safe='')}")
        answer = self._get(path)
        if isinstance(answer, dict):
            answer = {**answer, "id": schema_id}
        return self._schema(path, answer)

    def _schema(self, path: str, answer: Any) -> RegisteredSchema:
        if not isinstance(answer, dict):
            raise self._malformed(path, "a JSON object")
        schema_id, text = answer.get("id"), answer.get("schema")
        schema_type = answer.get("schemaType", "AVRO")  # left out for Avro, as Confluent's answers do
        references = answer.get("references", [])
        if not isinstance(schema_id, int) or isinstance(schema_id, bool) or not isinstance(text, str):
            raise self._malformed(path, "an id and a schema")
        if schema_type not in ("AVRO", "PROTOBUF", "JSON"):
            raise self._malformed(path, "a schemaType of AVRO, PROTOBUF or JSON")
        if not isinstance(references, list) or not all(isinstance(r, dict) for r in references):
            raise self._malformed(path, "a list of references")
        return RegisteredSchema(schema_id, schema_type, text, tuple(references))

    def _malformed(self, path: str, wanted: str) -> SchemaRegistryError:
        return SchemaRegistryError(f"schema registry {self.name}: GET {path} did not answer {wanted}")

    def _get(self, path: str) -> Any:
        """The JSON answer to GET ``path`` from the first address that answers it."""
        causes: list[str] = []
        for url in self.registry.urls:
            try:
                return self._get_from(url.rstrip("/"), path)
            except _Unanswered as exc:
                causes.append(f"{url}: {exc}")
        raise SchemaRegistryError(
            f"schema registry {self.name} did not answer GET {path}: {causes[0]}"
            + (f" (and {len(causes) - 1} more address(es) failed)" if len(causes) > 1 else "")
        )

    def _get_from(self, base: str, path: str) -> Any:
        request = urllib.request.Request(base + path, headers=self._headers, method="GET")
        timeout = self.registry.timeout_ms / 1000
        try:
            with self._opener.open(request, timeout=timeout) as response:
                body = self._read(response)
        except urllib.error.HTTPError as exc:
            with exc:
                body = self._read(exc) if exc.fp is not None else b""
            if exc.code >= 500:
                raise _Unanswered(f"HTTP {exc.code} {_error_text(body)}".rstrip()) from None
            raise SchemaRegistryError(
                f"schema registry {base}: GET {path} answered HTTP {exc.code} {_error_text(body)}".rstrip()
            ) from None
        except urllib.error.URLError as exc:
            raise _Unanswered(_first_line(exc.reason)) from None
        except TimeoutError:
            raise _Unanswered(f"no answer within {self.registry.timeout_ms} ms") from None
        except (OSError, http.client.HTTPException) as exc:  # a reset, TLS, or a server that speaks no HTTP
            raise _Unanswered(_first_line(exc) if str(exc).strip() else type(exc).__name__) from None
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise SchemaRegistryError(f"schema registry {base}: GET {path} answered no JSON ({exc})") from None

    def _read(self, response: Any) -> bytes:
        body: bytes = response.read(self.max_response_bytes + 1)
        if len(body) > self.max_response_bytes:
            raise SchemaRegistryError(
                f"schema registry {self.name}: an answer larger than {self.max_response_bytes} bytes"
            )
        return body


def _error_text(body: bytes) -> str:
    """The registry's error as it words it (``{"error_code": 40401, "message": ...}``), shortened."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(data, dict) and "message" in data:
        code = data.get("error_code")
        return f"(error {code}: {str(data['message'])[:300]})" if code is not None else str(data["message"])[:300]
    return ""


def _first_line(cause: object) -> str:
    text = str(cause).strip() or type(cause).__name__
    return text.splitlines()[0]


def _tls_context(registry: Registry) -> ssl.SSLContext:
    """The context https:// addresses are reached with; SchemaRegistryError naming the file that fails."""
    tls = registry.tls
    try:
        context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if not tls.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if tls.certificate is not None:
            context.load_cert_chain(tls.certificate, tls.key)
    except (OSError, ValueError) as exc:
        raise SchemaRegistryError(
            f"schema registry {', '.join(registry.urls)}: TLS settings cannot be used "
            f"({tls.ca_file}, {tls.certificate}): {_first_line(exc)}"
        ) from None
    return context
