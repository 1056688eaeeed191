"""The errors of the schema registry server: one root, :class:`SchemaRegistryError`, under kafkalog's.

- :class:`ApiError`: what a REST request is answered with: an HTTP status and Confluent's
  ``{"error_code": N, "message": "..."}``, the codes and texts of Confluent's registry (its first
  three digits are the HTTP status), built by the functions below so that every text is written once;
- :class:`RegistryConfigError`: a setting of ``kafkalog registry`` that is invalid (the message
  names the key);
- :class:`StoreError`: the ``_schemas`` topic cannot be read or written (a REST request that needed
  it answers 50001/50002).
"""

from __future__ import annotations

from kafkalog.errors import KafkalogError


class SchemaRegistryError(KafkalogError):
    """Root of the errors of :mod:`kafkalog.schema_registry`."""


class RegistryConfigError(SchemaRegistryError):
    """A registry setting is invalid; the message starts with the key."""


class StoreError(SchemaRegistryError):
    """The ``_schemas`` topic could not be read or written; ``timeout`` when it took too long,
    ``too_large`` when the cluster refused a record as larger than the topic takes."""

    def __init__(self, message: str, *, timeout: bool = False, too_large: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.too_large = too_large


class ApiError(SchemaRegistryError):
    """An answer to a REST request that is not a success: ``status`` (HTTP), ``error_code``
    (Confluent's, whose first three digits are usually the status) and ``message``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


# Confluent's texts (io.confluent.kafka.schemaregistry.rest.exceptions.Errors), one function per code.


def not_found(path: str) -> ApiError:
    """A path the registry does not serve (clients probe some, e.g. ``/associations``, and take a 404)."""
    return ApiError(404, 404, f"HTTP 404 Not Found: {path}")


def method_not_allowed(method: str) -> ApiError:
    return ApiError(405, 405, f"HTTP 405 Method Not Allowed: {method}")


def subject_not_found(subject: str) -> ApiError:
    return ApiError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> ApiError:
    return ApiError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: object | None = None) -> ApiError:
    return ApiError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> ApiError:
    return ApiError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> ApiError:
    return ApiError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> ApiError:
    return ApiError(
        404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete permanently"
    )


def version_not_soft_deleted(subject: str, version: int) -> ApiError:
    return ApiError(
        404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted"
    )


def subject_level_compatibility_not_configured(subject: str) -> ApiError:
    return ApiError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_level_mode_not_configured(subject: str) -> ApiError:
    return ApiError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible_schema(subject: str, details: list[str], error_code: int) -> ApiError:
    """409 with ``error_code`` 409 (Confluent up to 8.0.3/8.1) or 40901 (8.0.4/8.2 on): a setting."""
    return ApiError(
        409,
        error_code,
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{', '.join(details)}]",
    )


def invalid_schema(message: str) -> ApiError:
    return ApiError(422, 42201, message)


def invalid_version(version: str) -> ApiError:
    return ApiError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level() -> ApiError:
    return ApiError(
        422,
        42203,
        "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
        "forward_transitive, and full_transitive",
    )


def invalid_mode() -> ApiError:
    return ApiError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")


def operation_not_permitted(message: str) -> ApiError:
    return ApiError(422, 42205, message)


def references_exist(schema_id: int) -> ApiError:
    return ApiError(422, 42206, f"One or more references exist to the schema {schema_id}.")


def invalid_subject(subject: str) -> ApiError:
    return ApiError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def unprocessable(message: str) -> ApiError:
    """A request body that is not the JSON the call takes (Confluent's JAX-RS answers 422 too)."""
    return ApiError(422, 422, message)


def store_error(message: str) -> ApiError:
    return ApiError(500, 50001, message)


def schema_too_large(message: str) -> ApiError:
    return ApiError(422, 42209, f"Write failed because schema is too large: {message}")


def operation_timeout(message: str) -> ApiError:
    return ApiError(500, 50002, message)


def forward_error(message: str) -> ApiError:
    return ApiError(500, 50003, message)


def leader_not_known() -> ApiError:
    return ApiError(500, 50004, "Leader not known.")


def forwarded_from_stranger(address: str) -> ApiError:
    return ApiError(403, 40301, f"A forwarded request is taken from the configured peers only, not from {address}")


def unauthorized() -> ApiError:
    return ApiError(401, 401, "Unauthorized")


def request_too_large(limit: int) -> ApiError:
    return ApiError(413, 413, f"Request body larger than {limit} bytes")
