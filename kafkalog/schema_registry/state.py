"""The registry's state: what the ``_schemas`` topic's records, applied in offset order, add up to.

Every registry process holds one, built by replaying the topic from its first offset and kept up to
date by applying each record as it is read (its own writes included: the state changes only when a
record comes back from the topic, so every process that reads the topic agrees). Applying a record
never fails: one that cannot be read, or that contradicts what is known (two schemas under one
id), is logged and skipped, so a topic shared with other implementations never stops a registry.

Invariants:
- a schema id names one schema (type, text, references) for good: the first record that gives it
  wins, and a later record giving it to another schema is skipped, even once hard deletes freed
  it (``retired`` remembers what it named while the topic holds its history); ``max_id`` only
  grows, so an id freed by hard deletes is not given again while the topic still holds a record
  of it (once compaction removed them all, a replay starts lower: as in Confluent's registry,
  docs/schema-registry.md's known limitations);
- a subject's version holds one schema id until its tombstone: a record rewriting the version
  with another id or schema (two primaries for a moment, each deciding the same next version) is
  skipped; the rewrites of a soft delete keep both and are applied. So every reader, applying the
  records in offset order, keeps the first writer's binding, and the writer whose record was
  skipped learns it when it reads its record back;
- ``ids`` maps a schema's identity to its id while some version (soft deleted or not) holds it;
- reads and applies hold ``lock`` (the reader thread applies while request threads read).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from kafkalog.schema_registry import records
from kafkalog.schemas.model import SchemaReference, SchemaType

log = logging.getLogger(__name__)

Identity = tuple[SchemaType, str, tuple[SchemaReference, ...]]
"""What makes two registrations one schema (one id): its type, canonical text and references."""


@dataclass(frozen=True, slots=True)
class StoredSchema:
    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...]

    @property
    def identity(self) -> Identity:
        return (self.schema_type, self.text, self.references)

    def digest(self) -> bytes:
        """A fingerprint of the schema (what ``retired`` keeps instead of its text)."""
        parts = [self.schema_type.value, self.text, *(f"{r.name}\0{r.subject}\0{r.version}" for r in self.references)]
        return hashlib.sha256("\0\1".join(parts).encode()).digest()


@dataclass(slots=True)
class RegistryState:
    """See the module docstring."""

    versions: dict[str, dict[int, records.SchemaValue]] = field(default_factory=dict)
    """subject -> version -> the version (soft-deleted ones too; hard-deleted ones are gone)."""
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    """id -> schema, for every id some version holds."""
    ids: dict[Identity, int] = field(default_factory=dict)
    retired: dict[int, bytes] = field(default_factory=dict)
    """id -> digest of the schema it named, for ids no version holds any more (hard deleted)."""
    configs: dict[str | None, str] = field(default_factory=dict)
    """subject (None: global) -> compatibility level set."""
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    applied: int = 0
    """How many offsets of the topic have been applied (the next offset to read)."""
    skipped: int = 0
    """Records that could not be applied (unreadable, or contradicting the state)."""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # ------------------------------------------------------------------ applying

    def apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """Apply the record at ``offset``; later offsets only (an offset seen already is ignored)."""
        with self.lock:
            if offset < self.applied:
                return
            self.applied = offset + 1
            record = records.decode(key, value)
            if isinstance(record, records.UnreadableRecord):
                self._skip(offset, record.reason)
            elif isinstance(record, records.SchemaRecord):
                self._schema(record, offset)
            elif isinstance(record, records.ConfigRecord):
                _set(self.configs, record.subject, record.level)
            elif isinstance(record, records.ModeRecord):
                _set(self.modes, record.subject, record.mode)
            elif isinstance(record, records.DeleteSubjectRecord):
                for version, value_ in self.versions.get(record.subject, {}).items():
                    if version <= record.version and not value_.deleted:
                        self.versions[record.subject][version] = replace(value_, deleted=True)

    def advance(self, end: int) -> None:
        """Offsets below ``end`` hold nothing more to apply (a compacted log's gaps, skipped batches)."""
        with self.lock:
            self.applied = max(self.applied, end)

    def _skip(self, offset: int, reason: str) -> None:
        self.skipped += 1
        log.warning("_schemas record at offset %d skipped: %s", offset, reason)

    def _schema(self, record: records.SchemaRecord, offset: int) -> None:
        subject_versions = self.versions.setdefault(record.subject, {})
        value = record.value
        previous = subject_versions.get(record.version)
        if (
            previous is not None
            and value is not None
            and (previous.schema_id, _stored(previous))
            != (
                value.schema_id,
                _stored(value),
            )
        ):
            self._skip(
                offset,
                f"subject {record.subject!r} version {record.version} holds schema id {previous.schema_id}: "
                f"a record giving it id {value.schema_id} (another schema) before its tombstone",
            )
            return
        subject_versions.pop(record.version, None)
        if previous is not None:
            self._release(previous)
        if value is None:
            if not subject_versions:
                del self.versions[record.subject]
            return
        if (value.subject, value.version) != (record.subject, record.version):
            self._skip(offset, f"a value for {value.subject!r} v{value.version} under the key of v{record.version}")
            return
        stored = _stored(value)
        known = self.schemas.get(value.schema_id)
        retired = self.retired.get(value.schema_id)
        if (known is not None and known != stored) or (known is None and retired not in (None, stored.digest())):
            self._skip(offset, f"schema id {value.schema_id} given again to another schema")
            if not subject_versions:
                del self.versions[record.subject]
            return
        self.retired.pop(value.schema_id, None)
        self.schemas[value.schema_id] = stored
        self.ids.setdefault(stored.identity, value.schema_id)
        self.max_id = max(self.max_id, value.schema_id)
        subject_versions[record.version] = value

    def _release(self, value: records.SchemaValue) -> None:
        """Forget ``value``'s schema id if no other version holds it any more."""
        if any(v.schema_id == value.schema_id for v in self.all_versions()):
            return
        stored = self.schemas.pop(value.schema_id, None)
        if stored is not None:
            self.retired[value.schema_id] = stored.digest()
        if stored is not None and self.ids.get(stored.identity) == value.schema_id:
            del self.ids[stored.identity]
            # another id may hold the same schema (given by an import): it stands for it now
            for other_id, other in sorted(self.schemas.items()):
                if other == stored:
                    self.ids[stored.identity] = other_id
                    break

    # ------------------------------------------------------------------ reading (callers hold lock)

    def all_versions(self) -> Iterator[records.SchemaValue]:
        for versions in self.versions.values():
            yield from versions.values()

    def live(self, subject: str) -> list[records.SchemaValue]:
        """The subject's versions not soft deleted, oldest first."""
        return sorted((v for v in self.versions.get(subject, {}).values() if not v.deleted), key=lambda v: v.version)

    def every(self, subject: str) -> list[records.SchemaValue]:
        """The subject's versions, soft-deleted ones too, oldest first."""
        return sorted(self.versions.get(subject, {}).values(), key=lambda v: v.version)


def _stored(value: records.SchemaValue) -> StoredSchema:
    return StoredSchema(value.schema_type, value.schema, value.references)


def _set(mapping: dict[str | None, str], key: str | None, value: str | None) -> None:
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value
