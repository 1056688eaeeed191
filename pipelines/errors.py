"""The exception root of pipelines and the errors of each stage (spec, plan, load, commit, storage).

Every error raised on purpose by pipelines derives from :class:`PipelineError`; its message names the
cause and where it happened (file:key for specs, topic-partition and offset for data, paths for
storage). Errors of the kafkalog client that reach a caller are wrapped in one of these.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Root of every pipelines error."""


class SpecError(PipelineError):
    """A pipeline YAML is invalid; the message starts with ``file:key.path``."""


class StorageError(PipelineError):
    """A storage operation failed (the message names the operation, the path and the cause)."""


class AlreadyExistsError(StorageError):
    """A create or rename refused because the destination exists (nothing is ever overwritten)."""


class PlanError(PipelineError):
    """A load cannot be planned or a stored plan no longer matches the source (e.g. a planned end
    offset beyond the log end after a broker truncation)."""


class DataLossError(PlanError):
    """Offsets a split needs are gone from the broker (retention deleted them) and the pipeline's
    policy is ``fail``. Names topic, partition, the expected offset and the earliest available."""

    def __init__(self, topic: str, partition: int, expected: int, earliest: int, latest: int) -> None:
        super().__init__(
            f"{topic}-{partition}: offset {expected} is no longer on the broker (earliest {earliest}, "
            f"latest {latest}); {earliest - expected} messages were deleted before they were loaded. "
            "Set on_offset_out_of_range: earliest (or latest) to skip them; the lost range is then "
            "recorded in the manifest"
        )
        self.topic = topic
        self.partition = partition
        self.expected = expected
        self.earliest = earliest
        self.latest = latest


class BadRecordError(PipelineError):
    """A message could not be decoded and the bad-record policy is ``fail`` (or the quarantined share
    exceeded its maximum). Names topic, partition, offset and the reason."""


class LoadError(PipelineError):
    """The Spark load of a run failed (a task failed past its retries, the broker was unreachable)."""


class ReconciliationError(PipelineError):
    """The staged output of a run does not account for every planned offset exactly once."""


class CommitError(PipelineError):
    """The commit of a run failed: a rename returned false or raised, a manifest is unreadable."""


class ConcurrentRunError(CommitError):
    """Another run of the same pipeline committed (or planned) the same sequence number first."""


class ValidationError(PipelineError):
    """An output's rows fail their expectations and cannot be published: too many rows fail a row
    check to quarantine them, a whole-output check (``row_count``) fails, or the rows kept still fail
    great-expectations. Names the output, the share of failing rows and the first failing checks."""


class FlowError(PipelineError):
    """A transform, validation or publish stage cannot go on (the message names the stage and why)."""


class ReplayError(PipelineError):
    """A replay cannot be planned or carried out (the message names the split or stage and why)."""


class CatalogError(PipelineError):
    """The metastore cannot be reached, refused a change, or holds something under a pipeline's
    table name that is not the pipeline's (the message names the metastore, the table and why)."""


class SchemaRegistryError(PipelineError):
    """The schema registry did not answer, or refused a request the run needs (the message names
    the registry's address, the request and the first cause). Raised on the driver, before Spark
    starts: no task asks the registry."""


class PayloadSchemaError(PipelineError):
    """A schema the values are read with cannot become the raw layer's columns, or is not the kind
    the decoder reads (the message names the subject, the version and the field)."""


class ChangeEventError(PipelineError):
    """A change event (Debezium's envelope) is malformed: an unknown ``op``, a missing row image,
    key column or ``source.lsn`` (the message names the record by partition and offset)."""
