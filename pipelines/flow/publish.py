"""The flow's publish: each output's validated partitions swapped in, whole or not at all.

Role: per output, the partitions to replace (stored first, so a retry replaces the same ones) are
swapped in: the old partition directory moves to ``_trash``, the staged one into its place
(renames that never replace); once all are in place a file says so (a retry after it only cleans
up: the staged rows may be half deleted by then), then the trash and the staged rows are deleted
and a marker records the publish (where each lives: pipelines.ledger.paths). A partition in scope
for which the run produced no rows is removed; rows outside the scope are refused
(``check_partitions``: they would replace a partition computed from other rows).

Invariants: readers of an output see each partition either old or new. Readers by path find a
partition being swapped missing for the moment between its two renames (rewind/replay
generations close that); readers by name (``Readers``, the metastore) never do, and see the run's
partitions all at once: publish shows them the staged rows first (one change), puts a copy of
those rows in place, and points them back (``_swap_keeping_staged``). Once the markers exist,
publishing again changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from typing import Protocol

from pipelines import faults
from pipelines.config.pipeline import PipelineSpec
from pipelines.config.steps import Output
from pipelines.errors import AlreadyExistsError, FlowError, StorageError
from pipelines.flow.validation import output_staging_dir, run_tag
from pipelines.layout import Partition, Scope, generation_dir, partition_of_dir, partition_path
from pipelines.ledger import paths
from pipelines.ledger.partitions import existing_partitions
from pipelines.ledger.state import PipelineState
from pipelines.progress import Reporter, counted
from pipelines.storage import Storage

_DT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_HOUR = re.compile(r"^\d{2}$")


class Readers(Protocol):
    """Where readers by name (a metastore, pipelines.catalog) find an output's partitions. Publish
    shows them the run's partitions at their staged rows before it swaps the directories, and at
    the final ones after: a reader by name never finds a partition missing between the two renames,
    nor a part of the run."""

    def shows(self, output: Output, generation: int) -> bool:
        """Whether readers by name see ``output``'s ``generation`` now (its table is registered)."""

    def stage(self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]) -> None:
        """Readers by name read each partition of ``locations`` there and no longer ``removed``,
        all from one moment."""

    def settle(
        self, output: Output, generation: int, locations: dict[Partition, str], removed: list[Partition]
    ) -> None:
        """The same partitions, now at their final ``locations``: the rows readers by name read do
        not change."""


class Publisher:
    """The publish of ``spec``'s outputs: markers and publish plans beside ``state``, each output's
    partitions swapped through ``storage_of`` (an output path → its storage)."""

    def __init__(
        self, spec: PipelineSpec, state: PipelineState, reporter: Reporter, storage_of: Callable[[str], Storage]
    ) -> None:
        self.spec = spec
        self.state = state
        self.reporter = reporter
        self.storage_of = storage_of

    def _published_marker(self, seq: int, output: Output) -> str:
        return paths.published_marker(self.state.root, seq, output.name)

    def _publish_plan(self, seq: int, output: Output) -> str:
        return paths.publish_plan(self.state.root, seq, output.name)

    def _publish_swapped(self, seq: int, output: Output) -> str:
        """Written once every partition of the plan is in place, before the staged rows are deleted:
        a retry after that only cleans up (the staged rows may be half deleted by then)."""
        return paths.publish_swapped(self.state.root, seq, output.name)

    def published(self, seq: int) -> bool:
        return all(self.state.storage.exists(self._published_marker(seq, o)) for o in self.spec.outputs)

    def started(self, seq: int, output: Output) -> bool:
        """Whether the publish of ``output`` for load #seq has begun (its plan is stored)."""
        return self.state.storage.exists(self._publish_plan(seq, output))

    def publish(
        self, seq: int, covered: list[int], scope: Scope, *, readers: Readers | None
    ) -> dict[str, list[Partition]]:
        """Swap every output's staged partitions of the flow targeting load #seq in (``covered``:
        the loads it covers, ``scope``: their partitions); returns the partitions replaced per
        output. ``readers``: readers by name, kept whole (None: only readers by path)."""
        done = {}
        for output in self.spec.outputs:
            if self.state.storage.exists(self._published_marker(seq, output)) or not covered:
                self.reporter.note(f"output {output.name}: run #{seq} is published already")
                continue
            try:
                done[output.name] = self._publish_output(seq, output, scope, readers) if scope.partitions else []
                record = json.dumps({"target": seq, "partitions": done[output.name]}).encode()
                for each in covered:  # the loads this flow covered are done for this output
                    with contextlib.suppress(AlreadyExistsError):
                        self.state.storage.write_new(self._published_marker(each, output), record)
            except StorageError as exc:
                raise FlowError(f"publishing {output.name} of run #{seq}: {exc} (publish again to finish)") from exc
        return done

    def _publish_output(self, seq: int, output: Output, scope: Scope, readers: Readers | None) -> list[Partition]:
        storage = self.storage_of(output.path)
        # partitions are swapped in the output's current generation (its root until a replay)
        base = generation_dir(output.path, self.state.current_generation())
        staged_root = output_staging_dir(self.spec.name, seq, output)
        tag = run_tag(self.spec.name, seq)
        trash_root = f"{output.path.rstrip('/')}/_trash/{tag}"
        plan_path = self._publish_plan(seq, output)
        if self.state.storage.exists(plan_path):
            stored = json.loads(self.state.storage.read_bytes(plan_path))
            replace = [tuple(p) for p in stored["replace"]]
            remove = [tuple(p) for p in stored["remove"]]
        else:
            if not storage.exists(f"{staged_root}/_SUCCESS"):
                raise FlowError(f"output {output.name} of run #{seq} was not validated: validate before publishing")
            staged = {partition_of_dir(f.path[len(staged_root) + 1 :]) for f in storage.walk_files(staged_root)}
            if scope.by_day:  # every existing partition of the days in scope: all were recomputed
                existing = existing_partitions(storage, base, output)
                in_scope = {p for p in existing if (p[0],) in scope.partitions}
            else:
                in_scope = set(scope.partitions)
            replace = sorted(p for p in staged if p is not None)
            check_partitions(output, replace, scope)
            remove = sorted(in_scope - set(replace))
            # stored before the first rename: a retry after a crash finishes the same publish
            self.state.storage.write_new(plan_path, json.dumps({"replace": replace, "remove": remove}).encode())
        copy_root = f"{output.path.rstrip('/')}/_staging/{tag}-copy"
        swapped = self._publish_swapped(seq, output)
        if not self.state.storage.exists(swapped):
            self._swap_in(seq, output, readers, storage, base, staged_root, trash_root, copy_root, replace, remove)
            with contextlib.suppress(AlreadyExistsError):
                self.state.storage.write_new(swapped, b"")
        partitions = replace + remove
        storage.delete(trash_root, recursive=True)
        storage.delete(staged_root, recursive=True)
        storage.delete(copy_root, recursive=True)
        self.reporter.note(f"output {output.name}: {counted(len(partitions), 'partition')} published from run #{seq}")
        return partitions

    def _swap_in(
        self,
        seq: int,
        output: Output,
        readers: Readers | None,
        storage: Storage,
        base: str,
        staged_root: str,
        trash_root: str,
        copy_root: str,
        replace: list[Partition],
        remove: list[Partition],
    ) -> None:
        """The partitions of the plan swapped into ``base`` (readers by name shown each at once)."""
        generation = self.state.current_generation()
        by_name = readers is not None and readers.shows(output, generation)
        if by_name:  # readers by name read the staged rows while the directories are swapped
            assert readers is not None
            rows_at = {p: f"{staged_root}/{partition_path(output.partition_by, p)}" for p in replace}
            readers.stage(output, generation, {p: d for p, d in rows_at.items() if storage.exists(d)}, remove)
            faults.crash_point("flow.outputs_shown")
        for partition, has_rows in [*((p, True) for p in replace), *((p, False) for p in remove)]:
            relative = partition_path(output.partition_by, partition)
            final, new, old = f"{base}/{relative}", f"{staged_root}/{relative}", f"{trash_root}/{relative}"
            try:
                if has_rows and by_name:
                    self._swap_keeping_staged(storage, new, final, old, f"{copy_root}/{relative}")
                elif has_rows and storage.exists(new):  # not swapped yet (else an earlier attempt did)
                    if storage.exists(final):
                        storage.rename_or_fail(final, old)
                    storage.rename_or_fail(new, final)
                elif not has_rows and storage.exists(final) and not storage.exists(old):
                    storage.rename_or_fail(final, old)  # in scope, no rows any more
            except StorageError as exc:
                raise FlowError(f"publishing {output.name} partition {relative} of run #{seq}: {exc}") from exc
        if by_name:
            assert readers is not None
            readers.settle(
                output, generation, {p: f"{base}/{partition_path(output.partition_by, p)}" for p in replace}, remove
            )

    @staticmethod
    def _swap_keeping_staged(storage: Storage, new: str, final: str, old: str, copy: str) -> None:
        """Swap a partition in while readers by name read its staged rows at ``new``: a copy of
        them takes the final place, so ``new`` stays whole until readers are pointed back.
        Idempotent: after a crash at any step, doing it again ends with the staged rows in place."""
        if storage.exists(old) and storage.exists(final):
            return  # swapped by an earlier attempt (the trash is made only by a swap)
        if not storage.exists(new):
            if storage.exists(final):
                return  # swapped and cleaned up by an earlier attempt
            raise FlowError(f"the staged rows of {final} are gone and the partition is not in place")
        storage.delete(copy, recursive=True)  # a copy a crash cut short is made again
        storage.copy_tree(new, copy)
        if storage.exists(final):
            storage.rename_or_fail(final, old)
        storage.rename_or_fail(copy, final)


def check_partitions(output: Output, partitions: list[Partition], scope: Scope) -> None:
    """Staged rows may replace only partitions the flow recomputed, named as the raw layer names them."""
    for partition in partitions:
        relative = partition_path(output.partition_by, partition)
        if not _DT.match(partition[0]) or (len(partition) > 1 and not _HOUR.match(partition[1])):
            raise FlowError(f"output {output.name}: partition {relative} is not dt=YYYY-MM-DD[/hour=HH]")
        if not scope.holds(partition):
            raise FlowError(
                f"output {output.name}: rows for partition {relative}, outside the partitions run "
                f"#{scope.seq} recomputed; a step must keep the dt/hour of its raw rows"
            )
