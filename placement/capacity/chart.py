"""A capacity answer (``report.report``) drawn as an SVG bar chart, by
hand (no plotting dependency): the roots with most room, coloured by the
class that runs out first, and the counts by aggregate when asked."""

from __future__ import annotations

from xml.sax.saxutils import escape

WIDTH = 900
BAR = 18  # height of a bar, and of the gap under it
LABEL = 230  # width of the labels' column
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")


def svg(answer: dict, names: dict[str, str] | None = None) -> str:
    """The chart of ``answer``; ``names``: provider (or aggregate) uuid ->
    the label to show instead."""
    names = names or {}
    classes = sorted({root["binding"] for root in answer["roots"] if root["binding"]})
    colours = {name: PALETTE[index % len(PALETTE)] for index, name in enumerate(classes)}
    kind = "exact" if answer["exact"] else "lower bound"
    parts: list[str] = []
    y = 30
    parts.append(_text(10, y, f"{answer['shape']}: {answer['total']} more fit ({kind})",
                       size=16, bold=True))
    y += 14
    if "drain" in answer:
        drain = answer["drain"]
        y += 18
        parts.append(_text(10, y, f"drained {len(drain['providers'])} providers: "
                                  f"{drain['placed']} of {drain['consumers']} consumers "
                                  "could be placed elsewhere", size=12))
    y += 30
    parts.append(_text(10, y, f"Roots with most room (of {answer['roots_with_room']} with "
                              f"room, {answer['roots_counted']} counted)", bold=True))
    y = _bars(parts, y + 10, [(names.get(root["uuid"], root["uuid"]), root["count"],
                               colours.get(root["binding"], "#999999"))
                              for root in answer["roots"]])
    x = 10
    for name in classes:
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colours[name]}"/>')
        parts.append(_text(x + 16, y + 11, f"runs out first: {name}", size=12))
        x += 40 + 8 * len(name) + 100
    y += 30
    if answer.get("aggregates"):
        parts.append(_text(10, y, "By aggregate", bold=True))
        y = _bars(parts, y + 10, [(names.get(uuid, uuid), total, PALETTE[0])
                                  for uuid, total in sorted(answer["aggregates"].items(),
                                                            key=lambda item: -item[1])])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y + 10}" '
            f'viewBox="0 0 {WIDTH} {y + 10}" font-family="sans-serif">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def _bars(parts: list[str], y: int, bars: list[tuple[str, int, str]]) -> int:
    """Horizontal bars, longest scaled to the chart's width; the y under them."""
    longest = max((value for _, value, _ in bars), default=0) or 1
    room = WIDTH - LABEL - 80
    for label, value, colour in bars:
        width = round(room * value / longest)
        parts.append(_text(LABEL - 8, y + BAR - 4, label[:32], size=12, anchor="end"))
        parts.append(f'<rect x="{LABEL}" y="{y}" width="{width}" height="{BAR}" '
                     f'fill="{colour}"/>')
        parts.append(_text(LABEL + width + 6, y + BAR - 4, str(value), size=12))
        y += BAR + 6
    return y + 10


def _text(x: int, y: int, text: str, size: int = 14, bold: bool = False,
          anchor: str = "start") -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (f'<text x="{x}" y="{y}" font-size="{size}"{weight} text-anchor="{anchor}">'
            f"{escape(text)}</text>")
