"""One self-contained HTML page: tables, figures embedded as base64 PNG (no network, no scripts), the sweep's spec."""
from __future__ import annotations

import base64
import html
import math
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import yaml

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; font-size: .85em; margin: .6em 0; }
th, td { border: 1px solid #ddd; padding: .25em .55em; text-align: right; }
th { background: #f4f4f4; } td.text { text-align: left; }
tr.bad td { background: #fde8e8; } tr.bound td { background: #fff6dc; }
figure { margin: 1em 0; } img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; } pre { background: #f7f7f7; padding: 1em; overflow-x: auto; }
.note { background: #fff6dc; border-left: 4px solid #e0b000; padding: .5em 1em; }
.ok { background: #e8f6e8; border-left: 4px solid #3a3; padding: .5em 1em; }
.verdict { background: #eef3fb; border-left: 4px solid #3b6fb6; padding: .6em 1em; font-size: 1.05em; }
tr.disagrees td, tr.moving td { background: #fff6dc; }
"""


def cell(value) -> tuple[str, str]:
    """(text, css class) for one table cell."""
    if value is None:
        return "–", ""
    if isinstance(value, bool):
        return ("yes" if value else "no"), "text"
    if isinstance(value, float):
        if math.isinf(value):
            return ("∞ (diverged)" if value > 0 else "−∞"), ""
        if math.isnan(value):
            return "nan", ""
        return (f"{value:.4g}" if value != 0 else "0"), ""
    if isinstance(value, int):
        return str(value), ""
    return html.escape(str(value)), "text"


def table(df: pl.DataFrame, row_class: str | None = None, limit: int = 500) -> str:
    """An HTML table; `row_class` names a boolean column that marks rows (class = that column's name)."""
    columns = df.columns
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = []
    for r in df.head(limit).iter_rows(named=True):
        cls = f' class="{row_class}"' if row_class and r.get(row_class) else ""
        cells = "".join(f'<td class="{k}">{t}</td>' if k else f"<td>{t}</td>" for t, k in (cell(r[c]) for c in columns))
        rows.append(f"<tr{cls}>{cells}</tr>")
    more = f"<p>… and {len(df) - limit} more rows (see the CSV).</p>" if len(df) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


def image(png: Path, caption: str) -> str:
    """A figure with the PNG embedded and a link to its SVG twin (relative: next to the page)."""
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    svg = png.with_suffix(".svg")
    link = f' (<a href="{html.escape(svg.name)}">SVG</a>)' if svg.exists() else ""
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}{link}</figcaption></figure>")


def page(title: str, sections: list[tuple[str, str]], spec: dict) -> str:
    """The whole document: sections are (heading, inner HTML); the spec closes the page as YAML."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(f"<h2>{html.escape(h)}</h2>\n{inner}\n" for h, inner in sections)
    spec_text = html.escape(yaml.safe_dump(spec, sort_keys=False))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>\n'
            f"<body><h1>{html.escape(title)}</h1><p>Generated {stamp} by deltamup report.</p>\n{body}"
            f"<h2>Sweep spec</h2><pre>{spec_text}</pre></body></html>\n")
