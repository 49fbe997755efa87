"""Plain-text tables for command-line output."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_table"]


def _cell(value: object) -> str:
    if value is None:  # a missing value (no interval, no point)
        return "-"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value in (float("inf"), float("-inf")):
            return "off" if value > 0 else "-inf"
        # 4 significant digits below 10,000; above, every integer digit (never 1.371e+04)
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def format_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """Left-aligned text columns; floats to 4 significant digits (from 10,000 up: rounded to an
    integer, never in scientific notation), NaN and None as '-', +inf as 'off'. Counts are
    best passed as text with thousands separators (``f"{n:,}"``)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)
