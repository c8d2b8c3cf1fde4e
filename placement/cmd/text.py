"""Plain-text output of the console scripts."""

from __future__ import annotations


def aligned(rows: list[list[str]], indent: str = "") -> list[str]:
    """``rows`` of cells as lines of left-aligned columns, two spaces
    apart, each line after ``indent``, its trailing blanks dropped."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(width)
                               for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]
