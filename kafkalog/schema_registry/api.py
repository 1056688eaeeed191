"""The REST API: a request (method, path, query, body) to an answer (status, JSON), no sockets.

Role: Confluent's registry's paths, routed to kafkalog.schema_registry.registry; what the HTTP
server (kafkalog.schema_registry.server) reads from a connection comes here, and what it writes
back comes from here, so the API is tested without a socket.

Every input is untrusted: a path segment is percent-decoded after the path is split (a subject may
hold ``/`` as ``%2F``, never a new segment), query booleans are ``true`` in any case and anything
else false, a body must be JSON of one of the registry's media types (or none given) and is
refused with 422 when it is not JSON, nested too deeply, or a number too long to read. Unknown JSON
properties are ignored, as Confluent's registry ignores them. A path not served answers 404 with a
JSON error body (clients probe some, e.g. confluent-kafka's ``/associations``, and take only a 404),
a served path with another method 405.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from kafkalog.schema_registry import errors
from kafkalog.schema_registry.registry import Registry

CONTENT_TYPE: Final = "application/vnd.schemaregistry.v1+json"
MEDIA_TYPES: Final = frozenset(
    {"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json"}
)
SCHEMA_TYPES: Final = ["JSON", "PROTOBUF", "AVRO"]
_MAX_QUERY_FIELDS: Final = 50
_INTEGER = re.compile(r"-?[0-9]{1,10}\Z")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    segments: tuple[str, ...]
    query: Mapping[str, str]
    body: bytes = b""
    content_type: str | None = None

    @classmethod
    def of(cls, method: str, target: str, body: bytes = b"", content_type: str | None = None) -> Request:
        """A request from its method and target (``/path?query``); 404 for a target that is no path."""
        parts = urlsplit(target)
        if not parts.path.startswith("/"):
            raise errors.not_found(target[:200])
        try:
            segments = tuple(unquote(s, errors="strict") for s in parts.path.split("/")[1:] if s != "")
        except UnicodeDecodeError:
            raise errors.not_found(parts.path[:200]) from None
        try:
            pairs = parse_qsl(parts.query, keep_blank_values=True, max_num_fields=_MAX_QUERY_FIELDS)
        except ValueError:
            raise errors.unprocessable(f"more than {_MAX_QUERY_FIELDS} query parameters") from None
        return cls(method.upper(), segments, dict(pairs), body, content_type)

    def flag(self, name: str) -> bool:
        return self.query.get(name, "").strip().lower() == "true"

    def page(self, items: list[Any]) -> list[Any]:
        """``items`` from ``offset`` (default 0), at most ``limit`` of them (default, or -1: all)."""
        bounds = []
        for name, default in (("offset", 0), ("limit", -1)):
            text = self.query.get(name, "").strip() or str(default)
            if not _INTEGER.match(text):
                raise errors.unprocessable(f"{name} must be an integer, not {text[:20]!r}")
            bounds.append(int(text))
        offset, limit = max(bounds[0], 0), bounds[1]
        return items[offset:] if limit < 0 else items[offset : offset + limit]

    def json(self) -> Any:
        """The body as JSON (None when there is none); 415 or 422 when it cannot be read."""
        if self.content_type:
            media = self.content_type.split(";", 1)[0].strip().lower()
            if media not in MEDIA_TYPES:
                raise errors.ApiError(415, 415, "HTTP 415 Unsupported Media Type")
        if not self.body.strip():
            return None
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError, or a number too long
            raise errors.unprocessable(f"Unrecognized JSON: {e}") from None
        except RecursionError:
            raise errors.unprocessable("Unrecognized JSON: nested too deeply") from None


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = CONTENT_TYPE

    @classmethod
    def of_json(cls, value: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())

    @classmethod
    def of_error(cls, error: errors.ApiError) -> Response:
        return cls.of_json(error.body(), error.status)


Handler = Callable[[Request], Any]
"""A route's handler: the JSON value answered (or a Response as it is)."""


class Api:
    """Routes requests to a :class:`Registry`. ``is_write`` says which requests change the state
    (only the primary serves them; the others forward them)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def handle(self, request: Request) -> Response:
        try:
            handler = self._route(request)
            answer = handler(request)
        except errors.ApiError as e:
            return Response.of_error(e)
        return answer if isinstance(answer, Response) else Response.of_json(answer)

    def is_write(self, request: Request) -> bool:
        s, method = request.segments, request.method
        if method == "DELETE":
            return bool(s) and s[0] in ("subjects", "config", "mode")
        if method == "PUT":
            return bool(s) and s[0] in ("config", "mode")
        if method == "POST":
            return len(s) == 3 and s[0] == "subjects" and s[2] == "versions"
        return False

    def _route(self, request: Request) -> Handler:
        routes = self._routes(request.segments)
        if routes is None:
            raise errors.not_found("/" + "/".join(request.segments))
        handler = routes.get(request.method)
        if handler is None:
            raise errors.method_not_allowed(request.method)
        return handler

    def _routes(self, s: tuple[str, ...]) -> dict[str, Handler] | None:
        r = self.registry
        n = len(s)
        if n == 0:
            return {"GET": lambda q: {}, "POST": lambda q: {}}
        head = s[0]
        if head == "schemas" and n == 1:
            return {
                "GET": lambda q: q.page(
                    r.schemas(
                        prefix=q.query.get("subjectPrefix", ""), deleted=q.flag("deleted"),
                        latest_only=q.flag("latestOnly"),
                    )
                )
            }  # fmt: skip
        if head == "schemas" and n >= 2:
            if s[1] == "types" and n == 2:
                return {"GET": lambda q: SCHEMA_TYPES}
            if s[1] == "ids" and n == 3:
                return {
                    "GET": lambda q: r.schema_by_id(s[2], fmt=q.query.get("format"), fetch_max_id=q.flag("fetchMaxId"))
                }
            if s[1] == "ids" and n == 4 and s[3] == "schema":
                return {"GET": lambda q: _raw(r.schema_by_id(s[2], fmt=q.query.get("format"))["schema"])}
            if s[1] == "ids" and n == 4 and s[3] == "subjects":
                return {"GET": lambda q: q.page(r.subjects_of_id(s[2], deleted=q.flag("deleted")))}
            if s[1] == "ids" and n == 4 and s[3] == "versions":
                return {"GET": lambda q: q.page(r.versions_of_id(s[2], deleted=q.flag("deleted")))}
            return None
        if head == "subjects":
            return self._subject_routes(s)
        if head == "compatibility" and n in (4, 5) and s[1] == "subjects" and s[3] == "versions":
            version = s[4] if n == 5 else None
            return {
                "POST": lambda q: r.test_compatibility(
                    s[2], version, q.json(), normalize=q.flag("normalize"), verbose=q.flag("verbose")
                )
            }
        if head == "config" and n <= 2:
            subject = s[1] if n == 2 else None
            return {
                "GET": lambda q: r.config(subject, default_to_global=q.flag("defaultToGlobal")),
                "PUT": lambda q: r.set_config(subject, q.json()),
                "DELETE": lambda q: r.delete_config(subject),
            }
        if head == "mode" and n <= 2:
            subject = s[1] if n == 2 else None
            routes: dict[str, Handler] = {
                "GET": lambda q: r.mode(subject, default_to_global=q.flag("defaultToGlobal")),
                "PUT": lambda q: r.set_mode(subject, q.json(), force=q.flag("force")),
            }
            if subject is not None:
                routes["DELETE"] = lambda q: r.delete_mode(subject)
            return routes
        if head == "contexts" and n == 1:
            return {"GET": lambda q: ["."]}
        return None

    def _subject_routes(self, s: tuple[str, ...]) -> dict[str, Handler] | None:
        r = self.registry
        n = len(s)
        if n == 1:
            return {
                "GET": lambda q: q.page(
                    r.subjects(
                        prefix=q.query.get("subjectPrefix", ""),
                        deleted=q.flag("deleted"),
                        deleted_only=q.flag("deletedOnly"),
                    )
                )
            }
        subject = s[1]
        if n == 2:
            return {
                "POST": lambda q: r.lookup(subject, q.json(), normalize=q.flag("normalize"), deleted=q.flag("deleted")),
                "DELETE": lambda q: r.delete_subject(subject, permanent=q.flag("permanent")),
            }
        if s[2] != "versions":
            return None
        if n == 3:
            return {
                "GET": lambda q: q.page(
                    r.versions(subject, deleted=q.flag("deleted"), deleted_only=q.flag("deletedOnly"))
                ),
                "POST": lambda q: r.register(subject, q.json(), normalize=q.flag("normalize")),
            }
        version = s[3]
        if n == 4:
            return {
                "GET": lambda q: r.version(subject, version, deleted=q.flag("deleted"), fmt=q.query.get("format")),
                "DELETE": lambda q: r.delete_version(subject, version, permanent=q.flag("permanent")),
            }
        if n == 5 and s[4] == "schema":
            return {
                "GET": lambda q: _raw(
                    r.version_schema(subject, version, deleted=q.flag("deleted"), fmt=q.query.get("format"))
                )
            }
        if n == 5 and s[4] == "referencedby":
            return {"GET": lambda q: q.page(r.referenced_by(subject, version, deleted=q.flag("deleted")))}
        return None


def _raw(text: str) -> Response:
    """A schema's text as the body itself (``.../schema`` paths answer the schema, not JSON around it)."""
    return Response(200, text.encode())
