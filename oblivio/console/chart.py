"""The health page's chart, drawn on the server as SVG: no script, no library."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from oblivio.memory.oversight import DayFigure

WIDTH, HEIGHT = 640, 220
LEFT, BOTTOM, TOP = 48, 36, 16


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def time_to_certificate_svg(days: Sequence[DayFigure]) -> str:
    """Bars of the median time from request to certificate, one per day."""
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    highest = max((d.median_seconds or 0.0 for d in days), default=0.0) or 1.0
    slot = plot_w / max(len(days), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" class="chart" '
        'aria-label="Median time from erasure request to certificate, per day">',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 8}" y2="{TOP + plot_h}" '
        'class="axis"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 10}" text-anchor="end" class="tick">'
        f"{escape(_duration(highest))}</text>",
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end" class="tick">0</text>',
    ]
    for i, day in enumerate(days):
        x = LEFT + i * slot
        label = day.day.strftime("%d %b")
        if day.median_seconds is not None:
            bar_h = max(1.0, plot_h * day.median_seconds / highest)
            title = (
                f"{day.day.isoformat()}: {day.certified} certified, "
                f"median {_duration(day.median_seconds)}"
            )
            parts.append(
                f'<rect x="{x + slot * 0.15:.1f}" y="{TOP + plot_h - bar_h:.1f}" '
                f'width="{slot * 0.7:.1f}" height="{bar_h:.1f}" class="bar">'
                f"<title>{escape(title)}</title></rect>"
            )
        if i % 2 == 0 or len(days) <= 7:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                f'text-anchor="middle" class="tick">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
