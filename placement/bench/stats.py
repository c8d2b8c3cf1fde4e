"""Latency samples, their summary, and the report (table and JSON)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks."""
    if not sorted_values:
        return 0.0
    position = (len(sorted_values) - 1) * fraction
    lower = int(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    weight = position - lower
    return sorted_values[lower] * (1 - weight) + sorted_values[upper] * weight


@dataclass
class Samples:
    """Latencies (seconds) and statuses of one kind of operation."""

    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    errors: int = 0
    first_error: str = ""

    def add(self, seconds: float, status: int | str, ok: bool, body: bytes = b"") -> None:
        self.latencies.append(seconds)
        self.statuses[str(status)] += 1
        if not ok:
            self.errors += 1
            if not self.first_error:
                self.first_error = f"{status}: {body[:400].decode(errors='replace')}"

    def merge(self, other: Samples) -> None:
        self.latencies.extend(other.latencies)
        self.statuses.update(other.statuses)
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error

    def summary(self, wall_seconds: float) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        count = len(ordered)
        return {
            "count": count,
            "errors": self.errors,
            "rate": round(count / wall_seconds, 2) if wall_seconds > 0 else 0.0,
            "p50_ms": _ms(percentile(ordered, 0.50)),
            "p95_ms": _ms(percentile(ordered, 0.95)),
            "p99_ms": _ms(percentile(ordered, 0.99)),
            "mean_ms": _ms(sum(ordered) / count if count else 0.0),
            "max_ms": _ms(ordered[-1] if ordered else 0.0),
            "statuses": dict(sorted(self.statuses.items())),
            **({"first_error": self.first_error} if self.first_error else {}),
        }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def format_table(results: list[dict[str, Any]]) -> str:
    """One line per scenario cell; ``rate`` is operations (or claims) per
    second, ``cpu ms/op`` the server's CPU time per operation, ``rss MB``
    the resident memory of the largest server process (a worker) after
    the cell."""
    header = ("scenario", "c", "ops", "errors", "rate/s", "p50 ms", "p95 ms", "p99 ms",
              "cpu ms/op", "rss MB", "notes")
    rows = [header]
    for result in results:
        rows.append((
            result["name"], str(result["concurrency"]), str(result["count"]),
            str(result["errors"]), f"{result['rate']:.1f}", f"{result['p50_ms']:.1f}",
            f"{result['p95_ms']:.1f}", f"{result['p99_ms']:.1f}",
            f"{result.get('server_cpu_ms_per_op', 0.0):.1f}",
            f"{max(result.get('server_rss_mb') or [0.0]):.0f}", result.get("notes", ""),
        ))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header) - 1)]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [value.rjust(width) for value, width in zip(row[1:-1], widths[1:], strict=True)]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_json(path: str, report: dict[str, Any]) -> None:
    with open(path, "w") as output:
        json.dump(report, output, indent=2, sort_keys=False)
        output.write("\n")
