"""The ledger's stored records read back: what is not a record is the ledger's own error, naming
where it was read, never a KeyError or an AttributeError from deep inside."""

from __future__ import annotations

import pytest

from pipelines.errors import CommitError, PlanError
from pipelines.ledger.records import Manifest, Plan

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"[]", "not a JSON object"),
        (b'"manifest"', "not a JSON object"),
        (b"{not json", "the manifest is unreadable"),
        (b'{"format": 0}', "manifest format 0 is not"),
        (b'{"format": 1}', "the manifest is unreadable"),
    ],
)
def test_what_is_not_a_manifest_is_a_commit_error_naming_the_file(raw: bytes, said: str) -> None:
    with pytest.raises(CommitError, match=said) as caught:
        Manifest.loads(raw, "raw/_pipeline/manifests/0000000001.json")
    assert str(caught.value).startswith("raw/_pipeline/manifests/0000000001.json: ")


def test_a_plan_without_its_splits_is_a_plan_error() -> None:
    with pytest.raises(PlanError):
        Plan.from_json({"pipeline": "p", "seq": 1})
