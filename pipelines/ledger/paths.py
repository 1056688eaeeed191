"""Every path of a pipeline's run ledger: the ``_pipeline`` directory beside its raw layer.

Role: the one description of where the ledger's files live, as pure functions of names (nothing
here touches storage). Spark and Hive readers skip ``_`` directories, so none of this is ever read
as data. Under the raw layer's root::

    _pipeline/plans/<seq>.json              the plan of run <seq>, stored before any task runs
    _pipeline/staging/<seq>-<attempt>/      Spark's output of one attempt to execute plan <seq>
    _pipeline/leases/<seq>-<attempt>/       the lease of that attempt (pipelines.ledger.lease)
    _pipeline/manifests/<seq>.json          committed runs: THE commit point, and the only offset store
    _pipeline/runs/<run id>.json            run id -> seq, so a re-run of a committed run is a no-op
    _pipeline/reports/<seq>.json|.html      the run report (pipelines.reporting.report)
    _pipeline/flow/<seq>/steps/<step>/      a transform's staged result (pipelines.flow)
    _pipeline/flow/<seq>/validation/<output>.json    an output's validation results
    _pipeline/flow/<seq>/publish/<output>.json       the partitions its publish replaces (stored first)
    _pipeline/flow/<seq>/publish/<output>.swapped    every partition of that publish is in place
    _pipeline/flow/<seq>/published/<output>.json     the output is published for load <seq>
    _pipeline/metastore/                    the embedded metastore's database (a local raw layer)
    _pipeline/databases/<db>.db             where a database the pipeline creates goes by default

Invariants: a load's seq is written with 10 digits in plans, staging, leases, manifests and reports,
with 6 in the flow's directories (names sort as numbers); a run id or an output name is used as
given (the pipeline file's checks keep them to path-safe characters).
"""

from __future__ import annotations

from pathlib import Path

META = "_pipeline"
"""The ledger's directory under the raw layer's root."""

_STAGING_MARKER = f"/{META}/staging/"


def meta_dir(root: str) -> str:
    return f"{root.rstrip('/')}/{META}"


def seq_name(seq: int) -> str:
    """A load's seq as the plans, staging, leases and manifests name it."""
    return f"{seq:010d}"


def manifests_dir(root: str) -> str:
    return f"{meta_dir(root)}/manifests"


def manifest_path(root: str, seq: int) -> str:
    return f"{manifests_dir(root)}/{seq_name(seq)}.json"


def plan_path(root: str, seq: int) -> str:
    return f"{meta_dir(root)}/plans/{seq_name(seq)}.json"


def staging_root(root: str) -> str:
    """The directory of every attempt's staging."""
    return f"{meta_dir(root)}/staging"


def staging_dir(root: str, seq: int, attempt: str) -> str:
    return f"{staging_root(root)}/{seq_name(seq)}-{attempt}"


def staged_relative(path: str) -> str | None:
    """A staged file's path relative to the raw root (``_pipeline/staging/…``), from a path as Spark
    or storage gave it (schemes and authorities vary); None if ``path`` is not in any staging."""
    at = path.find(_STAGING_MARKER)
    return None if at < 0 else path[at + 1 :]


def leases_dir(meta: str) -> str:
    """The attempts' leases under ``meta``, a pipeline's ledger directory (``meta_dir``)."""
    return f"{meta}/leases"


def run_pointer(root: str, run_id: str) -> str:
    """The ``runs/`` index entry of run ``run_id``."""
    return f"{meta_dir(root)}/runs/{run_id}.json"


def report_base(root: str, seq: int) -> str:
    """Run #seq's report without its suffix: ``.json`` the document, ``.html`` the page."""
    return f"{meta_dir(root)}/reports/{seq_name(seq)}"


def flow_root(root: str) -> str:
    """The flow's directory: one ``<seq>`` directory per load a flow targeted."""
    return f"{meta_dir(root)}/flow"


def flow_dir(root: str, seq: int) -> str:
    return f"{flow_root(root)}/{seq:06d}"


def step_dir(root: str, seq: int, step: str) -> str:
    """Where step ``step`` of the flow of load #seq stages its result."""
    return f"{flow_dir(root, seq)}/steps/{step}"


def validation_record(root: str, seq: int, output: str) -> str:
    """The validation results of ``output`` in the flow of load #seq."""
    return f"{flow_dir(root, seq)}/validation/{output}.json"


def publish_plan(root: str, seq: int, output: str) -> str:
    """The partitions the publish of ``output`` for load #seq replaces and removes."""
    return f"{flow_dir(root, seq)}/publish/{output}.json"


def publish_swapped(root: str, seq: int, output: str) -> str:
    """Written once every partition of that publish is in place."""
    return f"{flow_dir(root, seq)}/publish/{output}.swapped"


def published_marker(root: str, seq: int, output: str) -> str:
    """The file that records that ``output`` was published for load #seq (read without Spark)."""
    return f"{flow_dir(root, seq)}/published/{output}.json"


def embedded_metastore_dir(local_root: str) -> str:
    """The embedded metastore's Derby database beside the state of a raw layer at ``local_root``
    (a local path, made absolute)."""
    return str(Path(local_root).absolute() / META / "metastore")


def database_dir(root: str, database: str) -> str:
    """Where ``database`` goes when nothing else names a place: beside the pipeline's state."""
    return f"{meta_dir(root)}/databases/{database}.db"
