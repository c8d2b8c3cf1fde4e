"""Inventories of resource providers and the capacity rules."""

from __future__ import annotations


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """How much of a class can be allocated in all: (total - reserved) * ratio."""
    return int((total - reserved) * allocation_ratio)
