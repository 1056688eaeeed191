"""The RESULT lines every benchmark ends with: collected while it runs, printed at the end."""

from __future__ import annotations

RESULTS: list[tuple[str, float, str]] = []


def result(name: str, value: float, unit: str) -> None:
    """Record one figure (printed by ``print_results`` as ``RESULT <name> <value> <unit>``)."""
    RESULTS.append((name, value, unit))


def print_results() -> None:
    print()
    for name, value, unit in RESULTS:
        print(f"RESULT {name} {value:.6g} {unit}")
