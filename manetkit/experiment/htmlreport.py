"""``manetkit experiment report DIR --html``: the report as one self-contained page.

It makes the report as ``manetkit experiment report DIR`` does
(:func:`manetkit.experiment.report.make_report`: tables, plots, goals, spec into
``DIR/report/``), then writes ``DIR/report/index.html``: that README rendered to HTML
(markdown-it-py, CommonMark with tables), every plot embedded as a ``data:`` URI, and a
table of every run with its fidelity (the medium's scheduling lag and the drops outside
the model over the run's window, ``manetkit.lab.fidelity``) and a link to its JSON.
The page needs nothing but the file itself (the links to ``../runs/*.json`` open the run
records beside it), so it opens from the file system or as a mail attachment.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

from manetkit.bench import report as out
from manetkit.experiment.report import make_report

_IMG = re.compile(r'<img src="([^"/]+\.png)"')

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2329; max-width: 1180px;
       margin: 24px auto; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #d6dae0; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13px; }
th, td { padding: 3px 8px; border: 1px solid #d6dae0; text-align: left; vertical-align: top; }
th { background: #eef0f3; }
tr:nth-child(even) td { background: #fafbfc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; margin: 6px 0; border: 1px solid #e3e6ea; }
pre { background: #f4f5f7; padding: 8px 10px; overflow: auto; font-size: 12px; }
code { font-size: 12px; }
.valid { color: #2b6e3a; font-weight: 600; } .invalid { color: #a32020; font-weight: 600; }
.muted { color: #68717c; }
"""


def _markdown_to_html(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def inline_images(body: str, folder: Path) -> str:
    """Every ``<img src="NAME.png">`` of ``folder`` as a data URI (missing ones stay)."""

    def repl(m: re.Match[str]) -> str:
        path = folder / html.unescape(m.group(1))
        try:
            data = base64.b64encode(path.read_bytes()).decode()
        except OSError:
            return m.group(0)
        return f'<img src="data:image/png;base64,{data}"'

    return _IMG.sub(repl, body)


def run_records(results: Path) -> list[dict[str, Any]]:
    """Every run of ``results/runs`` (finished or failed) with its fidelity, in name order."""
    rows = []
    for p in sorted((results / "runs").glob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            doc = None
        failed = p.name.endswith(".error.json")
        name = p.name.removesuffix(".error.json").removesuffix(".json")
        fid = doc.get("fidelity") if isinstance(doc, dict) else None
        rows.append(
            {
                "run": name,
                "file": f"../runs/{p.name}",
                "status": "failed" if failed else (doc or {}).get("status", "unreadable"),
                "fidelity": fid if isinstance(fid, dict) else None,
            }
        )
    return rows


def _ms(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def runs_html(rows: list[dict[str, Any]]) -> str:
    """The runs table: name (a link to its JSON), status, fidelity verdict and figures."""
    valid = sum(1 for r in rows if r["fidelity"] and r["fidelity"].get("valid"))
    invalid = sum(1 for r in rows if r["fidelity"] and not r["fidelity"].get("valid"))
    unrecorded = sum(1 for r in rows if not r["fidelity"])
    parts = [
        "<h2>Runs and their fidelity</h2>",
        f"<p>{len(rows)} run records: {valid} valid, {invalid} invalid, {unrecorded} without "
        "a fidelity record (made before runs recorded it, or failed). A run is valid when "
        "the medium handed its frames out on time (scheduling lag p99 within the spec's "
        "bound, 5 ms by default) and dropped none outside the model over the run's window "
        "(docs/medium.md, <code>manetkit.lab.fidelity</code>).</p>",
        "<table><thead><tr><th>run</th><th>status</th><th>fidelity</th>"
        "<th>lag p50 ms</th><th>lag p99 ms</th><th>lag max ms</th><th>drops outside the "
        "model</th><th>CPU s (medium)</th><th>host steal %</th><th>why not valid</th></tr>"
        "</thead><tbody>",
    ]
    for r in rows:
        f = r["fidelity"]
        if f is None:
            verdict, cells = '<span class="muted">not recorded</span>', ["-"] * 6 + [""]
        else:
            verdict = (
                '<span class="valid">valid</span>'
                if f.get("valid")
                else '<span class="invalid">invalid</span>'
            )
            drops = f.get("unmodelled_drops") or {}
            cpu = (f.get("cpu_s") or {}).get("medium")
            cells = [
                _ms(f.get("lag_p50_ms")),
                _ms(f.get("lag_p99_ms")),
                _ms(f.get("lag_max_ms")),
                str(sum(drops.values())) if isinstance(drops, dict) else "-",
                "-" if cpu is None else f"{cpu:.1f}",
                _ms(f.get("steal_pct")),
                html.escape("; ".join(f.get("reasons") or [])),
            ]
        nums = "".join(f'<td class="num">{c}</td>' for c in cells[:6])
        parts.append(
            f'<tr><td><a href="{html.escape(r["file"])}">{html.escape(r["run"])}</a></td>'
            f"<td>{html.escape(str(r['status']))}</td><td>{verdict}</td>{nums}"
            f"<td>{cells[6]}</td></tr>"
        )
    parts.append("</tbody></table>")
    return "\n".join(parts)


def make_html_report(results: Path) -> Path:
    """Make the report (:func:`make_report`) and ``report/index.html``; its path."""
    dest = make_report(results)
    body = inline_images(_markdown_to_html((dest / "README.md").read_text()), dest)
    title = f"Experiment report: {results.resolve().name}"
    page = (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"{body}\n{runs_html(run_records(results))}\n</body>\n</html>\n"
    )
    path = dest / "index.html"
    path.write_text(page)
    out.console.print(f"written {path}")
    return path
