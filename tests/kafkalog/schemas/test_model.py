"""The bounds every parser applies to its input before parsing (kafkalog.schemas.model.check_input)."""

from __future__ import annotations

import pytest

from kafkalog.schemas import avro, json_schema, protobuf
from kafkalog.schemas.model import MAX_REFERENCES, MAX_SCHEMA_LENGTH, MAX_TOTAL_LENGTH, check_input
from tests.kafkalog.schemas.refusals import refused


def test_input_within_the_bounds_passes() -> None:
    check_input("x" * MAX_SCHEMA_LENGTH, {f"r{i}": "y" for i in range(MAX_REFERENCES)})


@pytest.mark.parametrize(
    ("text", "references", "cause"),
    [
        ("x" * (MAX_SCHEMA_LENGTH + 1), {}, f"schema is {MAX_SCHEMA_LENGTH + 1} characters long: at most"),
        ("x", {"r": "y" * (MAX_SCHEMA_LENGTH + 1)}, "reference 'r' is .* characters long"),
        ("x", {f"r{i}": "" for i in range(MAX_REFERENCES + 1)}, f"{MAX_REFERENCES + 1} references: at most"),
        (
            "x",
            {f"r{i}": "y" * MAX_SCHEMA_LENGTH for i in range(MAX_TOTAL_LENGTH // MAX_SCHEMA_LENGTH)},
            "the schema and its references are .* characters long",
        ),
        ("a\ud800b", {}, r"schema is not valid Unicode: \\ud800 at character 1"),
        ("x", {"r": "\udfff"}, r"reference 'r' is not valid Unicode"),
    ],
)
def test_input_beyond_the_bounds_or_not_unicode_is_refused_by_every_parser(
    text: str, references: dict[str, str], cause: str
) -> None:
    for parse in (avro.parse, json_schema.parse):
        refused(lambda: parse(text, references), cause)  # noqa: B023  (called at once)
    refs = {f"{name}.proto": value for name, value in references.items()}
    refused(lambda: protobuf.parse(text, refs), cause.replace("'r'", "'r.proto'"))
