"""The registry's operations, as Confluent's registry defines them, over a store (kafkalog.schema_registry.store).

Role: every call of the REST API (kafkalog.schema_registry.api routes them here) with its rules:
subjects and versions, schemas by global id, registration (one id per schema across subjects,
idempotent in a subject), lookups, compatibility levels and checks (kafkalog.schemas.compatibility),
soft and hard deletes, modes. Every refusal is an :class:`~kafkalog.schema_registry.errors.ApiError`
with Confluent's code and text.

Invariants:
- reads answer from the store's state as it is (under its lock); writes run one at a time (a lock)
  on the registry that is primary, first catching up with the store (so an id or a version is
  decided on everything written before), and return once their records are applied;
- primacy is checked under the write lock, when a write is decided and again just before its
  records are produced (``term``: the election's generation while this registry is primary); a
  registry demoted meanwhile writes nothing and answers 50004. Two registries may still both
  believe they are primary for a moment (the coordinator has not yet told the old one): the topic
  orders their records and every reader keeps the first binding of a version or an id
  (kafkalog.schema_registry.state), so a registration answers only once its own record is read
  back as it was written; the loser answers 50001 and the client retries;
- a schema's identity is (type, canonical text, references): registering it again in a subject that
  holds it (not soft deleted) returns its id without a compatibility check; registering it in
  another subject gives it the same id;
- soft-deleted versions count for version numbers but not for ``latest`` or compatibility; a hard
  delete needs a soft delete first.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkalog.schema_registry import errors, records
from kafkalog.schema_registry.records import SchemaValue
from kafkalog.schema_registry.state import Identity, RegistryState, StoredSchema
from kafkalog.schema_registry.store import Store, Write
from kafkalog.schemas import avro, json_schema, protobuf
from kafkalog.schemas.compatibility import CompatibilityLevel, check
from kafkalog.schemas.errors import InvalidSchemaError
from kafkalog.schemas.model import ParsedSchema, SchemaReference, SchemaType
from kafkalog.schemas.protobuf import ProtobufSchema

log = logging.getLogger(__name__)

MAX_INT: Final = 2**31 - 1
MAX_REFERENCES: Final = 1000
"""References a schema may pull in, directly or not (a bound on the work one request causes)."""
_PARSED_CACHE: Final = 2000
READWRITE: Final = "READWRITE"
READONLY: Final = "READONLY"
READONLY_OVERRIDE: Final = "READONLY_OVERRIDE"
IMPORT: Final = "IMPORT"
MODES: Final = (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)
_NUMBER = re.compile(r"-?[0-9]{1,12}\Z")

Parser = Callable[..., ParsedSchema]
_PARSERS: Final[Mapping[SchemaType, Parser]] = {
    SchemaType.AVRO: avro.parse,
    SchemaType.PROTOBUF: protobuf.parse,
    SchemaType.JSON: json_schema.parse,
}


@dataclass(frozen=True, slots=True)
class Rules:
    """The settings the operations follow (from the registry's configuration)."""

    default_compatibility: CompatibilityLevel = CompatibilityLevel.BACKWARD
    """The global level while none is set through ``PUT /config``."""
    incompatible_error_code: int = 409
    """``error_code`` of an incompatible schema: 409 (Confluent up to 8.0.3/8.1) or 40901 (later)."""


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    """A request body that carries a schema (register, lookup, compatibility)."""

    text: str
    schema_type: SchemaType
    references: tuple[SchemaReference, ...]
    schema_id: int | None = None
    version: int | None = None


def schema_request(body: Any) -> SchemaRequest:
    """The schema a request body gives; 42201 (or 422) naming what is wrong."""
    if not isinstance(body, dict):
        raise errors.unprocessable("the request body must be a JSON object")
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise errors.invalid_schema("Empty schema")
    type_name = body.get("schemaType")
    if type_name is not None and not isinstance(type_name, str):
        raise errors.invalid_schema("schemaType must be a string")
    try:
        schema_type = SchemaType.of(type_name)
    except ValueError as e:
        raise errors.invalid_schema(f"Invalid schema type: {e}") from None
    given = body.get("references")
    if given is None:
        given = []
    if not isinstance(given, list) or len(given) > MAX_REFERENCES:
        raise errors.invalid_schema(f"references must be a list of at most {MAX_REFERENCES}")
    references = []
    for i, r in enumerate(given):
        if not (
            isinstance(r, dict)
            and isinstance(r.get("name"), str)
            and isinstance(r.get("subject"), str)
            and _is_int(r.get("version"))
            and (r["version"] == -1 or 1 <= r["version"] <= MAX_INT)
        ):
            raise errors.invalid_schema(f"reference {i}: a name, a subject and a version (1 to 2^31-1, or -1) needed")
        references.append(SchemaReference(r["name"], r["subject"], r["version"]))
    schema_id, version = body.get("id"), body.get("version")
    for name, value in (("id", schema_id), ("version", version)):
        if value is not None and not (_is_int(value) and (value == -1 or 0 <= value <= MAX_INT)):
            raise errors.unprocessable(f"{name} must be an integer from 1 to 2^31-1")
    return SchemaRequest(
        text,
        schema_type,
        tuple(references),
        schema_id if schema_id and schema_id > 0 else None,
        version if version and version > 0 else None,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_version(text: str) -> int | None:
    """A version of a path: a number from 1 to 2^31-1, or None for ``latest`` (or -1); 42202 else."""
    if text.lower() == "latest" or text == "-1":
        return None
    if _NUMBER.match(text) and 1 <= int(text) <= MAX_INT:
        return int(text)
    raise errors.invalid_version(text)


def parse_schema_id(text: str) -> int:
    if _NUMBER.match(text) and 1 <= int(text) <= MAX_INT:
        return int(text)
    raise errors.schema_not_found(text)


def check_subject(subject: str) -> None:
    """A subject name is not empty and holds no control character (42208 otherwise)."""
    if not subject.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in subject):
        raise errors.invalid_subject(subject)


def version_json(value: SchemaValue, schema: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.schema_id}
    if value.schema_type is not SchemaType.AVRO:
        out["schemaType"] = value.schema_type.value
    if value.references:
        out["references"] = [records.reference_json(r) for r in value.references]
    out["schema"] = value.schema if schema is None else schema
    return out


class Registry:
    """See the module docstring."""

    def __init__(self, store: Store, rules: Rules = Rules(), *, term: Callable[[], object | None] = lambda: 0) -> None:
        """``term``: while this registry is primary, a value that changes whenever the election
        moves (its generation); None while it is not primary."""
        self.store = store
        self.rules = rules
        self.term = term
        self._write_lock = threading.Lock()
        self._parsed: dict[Identity, ParsedSchema] = {}

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # ------------------------------------------------------------------ subjects and versions

    def subjects(self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False) -> list[str]:
        with self.state.lock:
            found = []
            for subject in self.state.versions:
                live = bool(self.state.live(subject))
                keep = (not live) if deleted_only else (live or deleted)
                if keep and subject.startswith(prefix):
                    found.append(subject)
            return sorted(found)

    def schemas(self, *, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[dict[str, Any]]:
        """Every version of every subject starting with ``prefix`` (``GET /schemas``), by subject
        then version; ``latest_only``: each subject's latest."""
        with self.state.lock:
            found = []
            for subject in sorted(s for s in self.state.versions if s.startswith(prefix)):
                versions = self.state.every(subject) if deleted else self.state.live(subject)
                found.extend(versions[-1:] if latest_only else versions)
        return [version_json(v) for v in found]

    def versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False) -> list[int]:
        with self.state.lock:
            every = self.state.every(subject)
            chosen = [v.version for v in every if (v.deleted if deleted_only else (deleted or not v.deleted))]
            if not chosen and not (deleted_only and every):
                raise errors.subject_not_found(subject)
            return chosen

    def _version(self, subject: str, version_text: str, *, deleted: bool) -> SchemaValue:
        """A version of a path, as Confluent's registry finds it: ``latest`` is the latest version
        not soft deleted (``deleted`` or not), a number any version (soft-deleted ones with
        ``deleted``). Not found: 40401 when the subject has no version (none but soft-deleted ones
        without ``deleted``), 40402 otherwise (``latest`` names itself -1 there, as in Confluent's)."""
        wanted = parse_version(version_text)
        with self.state.lock:
            every = self.state.every(subject)
            live = [v for v in every if not v.deleted]
        if wanted is None and live:
            return live[-1]
        for value in every if wanted is not None else ():
            if value.version == wanted and (deleted or not value.deleted):
                return value
        if not (every if deleted else live):
            raise errors.subject_not_found(subject)
        raise errors.version_not_found(-1 if wanted is None else wanted)

    def version(
        self, subject: str, version_text: str, *, deleted: bool = False, fmt: str | None = None
    ) -> dict[str, Any]:
        value = self._version(subject, version_text, deleted=deleted)
        return version_json(
            value, self._formatted(value.schema_type, value.schema, value.references, fmt, _named(value))
        )

    def version_schema(self, subject: str, version_text: str, *, deleted: bool = False, fmt: str | None = None) -> str:
        value = self._version(subject, version_text, deleted=deleted)
        return self._formatted(value.schema_type, value.schema, value.references, fmt, _named(value))

    def referenced_by(self, subject: str, version_text: str, *, deleted: bool = False) -> list[int]:
        """The ids of the schemas that reference the version (found soft deleted or not, as
        Confluent's registry finds it here); soft-deleted referrers too with ``deleted``."""
        value = self._version(subject, version_text, deleted=True)
        return self._referrers(value, deleted=deleted)

    def _referrers(self, value: SchemaValue, *, deleted: bool = False, within: str | None = None) -> list[int]:
        """The ids of the versions that reference ``value``: soft-deleted ones too with ``deleted`` (a
        hard delete must not leave them a dangling reference: they could not be parsed again), and
        none of subject ``within`` (deleted with it)."""
        with self.state.lock:
            return sorted(
                {
                    other.schema_id
                    for other in self.state.all_versions()
                    if (deleted or not other.deleted)
                    and other.subject != within
                    and any(r.subject == value.subject and r.version == value.version for r in other.references)
                }
            )

    # ------------------------------------------------------------------ schemas by id

    def schema_by_id(self, id_text: str, *, fmt: str | None = None, fetch_max_id: bool = False) -> dict[str, Any]:
        schema_id = parse_schema_id(id_text)
        with self.state.lock:
            stored = self.state.schemas.get(schema_id)
            max_id = self.state.max_id
        if stored is None:
            raise errors.schema_not_found(schema_id)
        out: dict[str, Any] = {}
        if stored.schema_type is not SchemaType.AVRO:
            out["schemaType"] = stored.schema_type.value
        if stored.references:
            out["references"] = [records.reference_json(r) for r in stored.references]
        out["schema"] = self._formatted(
            stored.schema_type, stored.text, stored.references, fmt, f"schema id {schema_id}"
        )
        if fetch_max_id:
            out["maxId"] = max_id
        return out

    def subjects_of_id(self, id_text: str, *, deleted: bool = False) -> list[str]:
        return sorted({v["subject"] for v in self.versions_of_id(id_text, deleted=deleted)})

    def versions_of_id(self, id_text: str, *, deleted: bool = False) -> list[dict[str, Any]]:
        schema_id = parse_schema_id(id_text)
        with self.state.lock:
            if schema_id not in self.state.schemas:
                raise errors.schema_not_found(schema_id)
            found = sorted(
                (v.subject, v.version)
                for v in self.state.all_versions()
                if v.schema_id == schema_id and (deleted or not v.deleted)
            )
        return [{"subject": s, "version": v} for s, v in found]

    # ------------------------------------------------------------------ parsing

    def _formatted(
        self,
        schema_type: SchemaType,
        text: str,
        references: tuple[SchemaReference, ...],
        fmt: str | None,
        named: str,
    ) -> str:
        """The text a read returns: as stored, or for Protobuf with ``format=serialized`` base64 of
        its descriptor (``named``: what the schema is, for an error)."""
        if fmt is not None and fmt.lower() == "serialized" and schema_type is SchemaType.PROTOBUF:
            parsed = self._parse_stored(schema_type, text, references, named)
            assert isinstance(parsed, ProtobufSchema)
            return parsed.serialized()
        return text

    def _reference_texts(
        self, references: Sequence[SchemaReference], *, new: bool = False
    ) -> tuple[dict[str, str], tuple[SchemaReference, ...]]:
        """Every schema ``references`` pull in, directly or not (name -> text), and the references
        with ``-1`` (latest) resolved; 42201 naming one that is not registered, or with ``new`` (a
        registration) one soft deleted (a schema stored already may reference one: it was not when
        it was registered)."""
        texts: dict[str, str] = {}
        resolved = []
        with self.state.lock:
            stack = [(r, True) for r in reversed(references)]
            seen: set[tuple[str, int]] = set()
            while stack:
                reference, direct = stack.pop()
                if reference.version == -1:
                    live = self.state.live(reference.subject)
                    value = live[-1] if live else None
                else:
                    value = self.state.versions.get(reference.subject, {}).get(reference.version)
                if value is None:
                    raise errors.invalid_schema(
                        f"Invalid schema: reference '{reference.name}' to subject '{reference.subject}' "
                        f"version {reference.version} is not registered"
                    )
                if new and direct and value.deleted:
                    raise errors.invalid_schema(
                        f"Invalid schema: reference '{reference.name}' to subject '{reference.subject}' "
                        f"version {value.version}, which is soft deleted"
                    )
                if direct:
                    resolved.append(SchemaReference(reference.name, reference.subject, value.version))
                if (value.subject, value.version) in seen:
                    continue
                seen.add((value.subject, value.version))
                if len(seen) > MAX_REFERENCES:
                    raise errors.invalid_schema(f"Invalid schema: more than {MAX_REFERENCES} references")
                texts.setdefault(reference.name, value.schema)
                stack.extend((r, False) for r in reversed(value.references))
        return texts, tuple(resolved)

    def _parse(self, request: SchemaRequest, *, new: bool = False) -> ParsedSchema:
        """``new``: a schema to register (its references may not be soft deleted)."""
        texts, references = self._reference_texts(request.references, new=new)
        try:
            return _PARSERS[request.schema_type](request.text, texts, declared=references)
        except InvalidSchemaError as e:
            raise errors.invalid_schema(f"Invalid schema: {e}") from None
        except RecursionError:
            raise errors.invalid_schema("Invalid schema: nested too deeply") from None

    def _parse_stored(
        self, schema_type: SchemaType, text: str, references: tuple[SchemaReference, ...], named: str
    ) -> ParsedSchema:
        """A schema of the topic, parsed (and kept: parsing costs). One that does not parse (written
        by another registry, or another version of this one, taking what this one does not) is a 422
        naming it (``named``: its subject and version, or its id) and the parser's first cause."""
        identity = (schema_type, text, references)
        parsed = self._parsed.get(identity)
        if parsed is None:
            try:
                parsed = self._parse(SchemaRequest(text, schema_type, references))
            except errors.ApiError as e:
                cause = e.message.removeprefix("Invalid schema: ")
                raise errors.invalid_schema(
                    f"Invalid schema: the stored {schema_type.value} schema of {named} does not parse here: {cause}"
                ) from None
            if len(self._parsed) >= _PARSED_CACHE:
                self._parsed.clear()
            self._parsed[identity] = parsed
        return parsed

    def _stored_parsed(self, value: SchemaValue) -> ParsedSchema:
        return self._parse_stored(value.schema_type, value.schema, value.references, _named(value))

    # ------------------------------------------------------------------ lookup and compatibility

    def lookup(self, subject: str, body: Any, *, normalize: bool = False, deleted: bool = False) -> dict[str, Any]:
        request = schema_request(body)
        with self.state.lock:
            candidates = self.state.every(subject) if deleted else self.state.live(subject)
        if not candidates:
            raise errors.subject_not_found(subject)
        parsed = self._parse(request)
        if normalize:
            parsed = parsed.normalized()
        identity = (parsed.schema_type, parsed.canonical(), tuple(parsed.references))
        for value in reversed(candidates):
            if (value.schema_type, value.schema, value.references) == identity:
                return version_json(value)
        raise errors.schema_not_found()

    def level(self, subject: str | None) -> CompatibilityLevel:
        """The level that applies to ``subject``: its own, else the global one, else the default."""
        with self.state.lock:
            name = self.state.configs.get(subject) if subject is not None else None
            name = name or self.state.configs.get(None)
        if name is None:
            return self.rules.default_compatibility
        try:
            return CompatibilityLevel.of(name)
        except ValueError:
            return self.rules.default_compatibility

    def _findings(
        self, subject: str, level: CompatibilityLevel, new: ParsedSchema, previous: Sequence[SchemaValue]
    ) -> list[str]:
        if level is CompatibilityLevel.NONE:
            return []
        previous = previous if level.transitive else previous[-1:]  # only those the level compares with
        parsed = [self._stored_parsed(v) for v in previous]
        try:
            found = check(level, new, parsed, versions=[v.version for v in previous])
        except InvalidSchemaError as e:  # too large to compare, nested too deeply: the new schema's fault
            raise errors.invalid_schema(f"Invalid schema: {e}") from None
        except RecursionError:
            raise errors.invalid_schema("Invalid schema: nested too deeply to compare") from None
        if found:
            found.append(f"{{validateFields: 'false', compatibility: '{level.value}'}}")
        return found

    def test_compatibility(
        self, subject: str, version_text: str | None, body: Any, *, normalize: bool = False, verbose: bool = False
    ) -> dict[str, Any]:
        """``version_text`` None: against every version the subject's level says (``/versions``)."""
        request = schema_request(body)
        wanted = None if version_text is None else parse_version(version_text)
        with self.state.lock:
            live = self.state.live(subject)
        if version_text is None or wanted is None:
            previous = live if version_text is None else live[-1:]
        else:
            previous = [v for v in live if v.version == wanted]
            if not previous:
                raise errors.version_not_found(wanted)
        parsed = self._parse(request)
        if normalize:
            parsed = parsed.normalized()
        found = self._findings(subject, self.level(subject), parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not found}
        if verbose:
            answer["messages"] = found
        return answer

    # ------------------------------------------------------------------ config and mode (reads)

    def config(self, subject: str | None, *, default_to_global: bool = False) -> dict[str, Any]:
        with self.state.lock:
            own = self.state.configs.get(subject) if subject is not None else None
        if subject is not None and own is None and not default_to_global:
            raise errors.subject_level_compatibility_not_configured(subject)
        return {"compatibilityLevel": own or self.level(None).value}

    def mode(self, subject: str | None, *, default_to_global: bool = False) -> dict[str, Any]:
        with self.state.lock:
            own = self.state.modes.get(subject) if subject is not None else None
            global_mode = self.state.modes.get(None, READWRITE)
        if subject is not None and own is None and not default_to_global:
            raise errors.subject_level_mode_not_configured(subject)
        return {"mode": own or global_mode}

    def _effective_mode(self, subject: str) -> str:
        with self.state.lock:
            return self.state.modes.get(subject) or self.state.modes.get(None) or READWRITE

    def _check_writable(self, subject: str) -> str:
        mode = self._effective_mode(subject)
        if mode in (READONLY, READONLY_OVERRIDE):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    # ------------------------------------------------------------------ writes

    def _primacy(self) -> object:
        """The term this registry is primary in (call it under the write lock); 50004 when it is not."""
        term = self.term()
        if term is None:
            raise errors.leader_not_known()
        return term

    def _write(self, batch: Sequence[Write], term: object) -> None:
        """Produce ``batch`` if this registry is still primary in ``term`` (50004 otherwise)."""
        if self.term() != term:
            raise errors.leader_not_known()
        self.store.write(batch)

    def register(self, subject: str, body: Any, *, normalize: bool = False) -> dict[str, Any]:
        check_subject(subject)
        request = schema_request(body)
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            mode = self._check_writable(subject)
            importing = mode == IMPORT
            if request.schema_id is not None and not importing:
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
            parsed = self._parse(request, new=True)
            if normalize:
                parsed = parsed.normalized()
            references = tuple(parsed.references)
            identity: Identity = (parsed.schema_type, parsed.canonical(), references)
            with self.state.lock:
                every = self.state.every(subject)
                live = [v for v in every if not v.deleted]
                same = [v for v in live if (v.schema_type, v.schema, v.references) == identity]
                known_id = self.state.ids.get(identity)
                next_id = self.state.max_id + 1
                taken = self.state.schemas.get(request.schema_id) if request.schema_id is not None else None
                retired = self.state.retired.get(request.schema_id) if request.schema_id is not None else None
            if same and (request.schema_id is None or request.schema_id == same[-1].schema_id):
                return {"id": same[-1].schema_id}
            if importing and request.schema_id is not None:
                if (taken is not None and taken.identity != identity) or (
                    taken is None and retired not in (None, StoredSchema(*identity).digest())
                ):
                    raise errors.ApiError(422, 42207, "The ID of an imported schema does not match the existing ID")
                schema_id = request.schema_id
            else:
                schema_id = known_id if known_id is not None else next_id
            if not importing:  # an import takes schemas as another registry accepted them
                found = self._findings(subject, self.level(subject), parsed, live)
                if found:
                    raise errors.incompatible_schema(subject, found, self.rules.incompatible_error_code)
            version = (every[-1].version + 1) if every else 1
            if importing and request.version is not None:
                if any(v.version == request.version for v in every):
                    raise errors.operation_not_permitted(
                        f"Version {request.version} of subject {subject} exists already"
                    )
                version = request.version
            if version > MAX_INT or schema_id > MAX_INT:
                raise errors.store_error("no version or id left under 2^31")
            value = SchemaValue(subject, version, schema_id, identity[1], parsed.schema_type, references)
            self._write([(records.schema_key(subject, version), value.encode())], term)
            with self.state.lock:
                landed = self.state.versions.get(subject, {}).get(version)
            if landed != value:  # another writer (a primary that had not yet learnt it was replaced) won
                raise errors.store_error(
                    "Register schema operation failed while writing to the Kafka store: subject "
                    f"'{subject}' version {version} (id {schema_id}) was written by another registry at the "
                    "same time; try again"
                )
            if self.term() != term:  # what landed stands (every reader keeps it), but say so
                log.warning("subject %r version %d written as primary was replaced meanwhile", subject, version)
            return {"id": schema_id}

    def delete_version(self, subject: str, version_text: str, *, permanent: bool = False) -> int:
        wanted = parse_version(version_text)
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            self._check_writable(subject)
            with self.state.lock:
                every = self.state.every(subject)
                live = self.state.live(subject)
            if not every:
                raise errors.subject_not_found(subject)
            if wanted is None:
                candidates = every if permanent else live
                if not candidates:
                    raise errors.version_not_found(version_text)
                value = candidates[-1]
            else:
                matches = [v for v in every if v.version == wanted]
                if not matches:
                    raise errors.version_not_found(wanted)
                value = matches[0]
            if permanent and not value.deleted:
                raise errors.version_not_soft_deleted(subject, value.version)
            if not permanent and value.deleted:
                raise errors.version_soft_deleted(subject, value.version)
            if self._referrers(value, deleted=permanent):
                raise errors.references_exist(value.schema_id)
            key = records.schema_key(subject, value.version)
            self._write([(key, None if permanent else _soft_deleted(value).encode())], term)
            return value.version

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            self._check_writable(subject)
            with self.state.lock:
                every = self.state.every(subject)
                live = self.state.live(subject)
                configured = subject in self.state.configs
                moded = subject in self.state.modes
            if not every:
                raise errors.subject_not_found(subject)
            if not permanent:
                if not live:
                    raise errors.subject_soft_deleted(subject)
                for value in live:
                    if self._referrers(value):
                        raise errors.references_exist(value.schema_id)
                last = live[-1].version
                self._write([(records.delete_subject_key(subject), records.delete_subject_value(subject, last))], term)
                return [v.version for v in live]
            if live:
                raise errors.subject_not_soft_deleted(subject)
            for value in every:
                if self._referrers(value, deleted=True, within=subject):
                    raise errors.references_exist(value.schema_id)
            batch: list[Write] = [(records.schema_key(subject, v.version), None) for v in reversed(every)]
            if configured:
                batch.append((records.config_key(subject), None))
            if moded:
                batch.append((records.mode_key(subject), None))
            self._write(batch, term)
            return [v.version for v in every]

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if subject is not None:
            check_subject(subject)
        if not isinstance(body, dict):
            raise errors.invalid_compatibility_level()
        name = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(name, str):
            raise errors.invalid_compatibility_level()
        try:
            level = CompatibilityLevel.of(name)
        except ValueError:
            raise errors.invalid_compatibility_level() from None
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            self._write([(records.config_key(subject), records.config_value(level.value))], term)
        return {"compatibility": level.value}

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            with self.state.lock:
                own = self.state.configs.get(subject)
                known = subject is None or bool(self.state.versions.get(subject))
            previous = own or self.level(None).value
            if own is None:
                if not known:
                    raise errors.subject_not_found(str(subject))
                if subject is not None:
                    raise errors.subject_level_compatibility_not_configured(subject)
            else:
                self._write([(records.config_key(subject), None)], term)
        return {"compatibilityLevel": previous}

    def set_mode(self, subject: str | None, body: Any, *, force: bool = False) -> dict[str, Any]:
        if subject is not None:
            check_subject(subject)
        name = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(name, str) or name.upper() not in MODES:
            raise errors.invalid_mode()
        mode = name.upper()
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            if mode == IMPORT and not force:
                with self.state.lock:
                    holding = [s for s in self.state.versions if subject is None or s == subject]
                if holding:
                    raise errors.operation_not_permitted("Cannot import since found existing subjects")
            self._write([(records.mode_key(subject), records.mode_value(subject, mode))], term)
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, Any]:
        with self._write_lock:
            term = self._primacy()
            self.store.catch_up()
            with self.state.lock:
                own = self.state.modes.get(subject)
                known = bool(self.state.versions.get(subject))
            if own is None:
                if not known:
                    raise errors.subject_not_found(subject)
                raise errors.subject_level_mode_not_configured(subject)
            self._write([(records.mode_key(subject), None)], term)
        return {"mode": own}


def _named(value: SchemaValue) -> str:
    return f"subject '{value.subject}' version {value.version} (id {value.schema_id})"


def _soft_deleted(value: SchemaValue) -> SchemaValue:
    return SchemaValue(
        value.subject, value.version, value.schema_id, value.schema, value.schema_type, value.references, True
    )
