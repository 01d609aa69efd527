"""A report as a list of blocks, written as Markdown, as one self-contained HTML file, and tables as CSV.

The evaluation and replay reports are built once as blocks (headings, paragraphs, lists, numbered
tables and figures) and rendered twice: ``report.md`` next to its PNG/SVG figures, and
``report.html`` with the PNGs embedded (base64 data URIs, inline CSS: one file to mail or archive,
no network). Tables and figures are numbered from 1 in the order they appear. In text, `code`
spans are marked with backticks in both renderings.
"""

from __future__ import annotations

import base64
import csv
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Union

CODE = re.compile(r"`([^`]*)`")
DISPLAY_DIGITS = 4  # significant digits of a number in the Markdown and HTML tables (the CSV keeps all)
STYLE = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; line-height: 1.4; color: #111; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #aaa; padding: 0.2em 0.6em; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: bold; padding-bottom: 0.3em; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; }
code { background: #f3f3f3; padding: 0 0.2em; }
"""


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


Cell = Union[str, float, int, None]


def shown(value: Cell, digits: int = DISPLAY_DIGITS) -> str:
    """A cell as displayed: numbers to ``digits`` significant digits, None and non-finite as "-"."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


@dataclass
class Table:
    caption: str
    header: list[str]
    rows: list[list[Cell]]  # numbers stay numbers: shown rounded, written to CSV in full
    number: int = 0  # set by Document.add

    def numeric(self, column: int) -> bool:
        return any(isinstance(row[column], (int, float)) and not isinstance(row[column], bool) for row in self.rows)


@dataclass
class Figure:
    caption: str
    png: Path
    number: int = 0


Block = Union[Heading, Paragraph, Bullets, Table, Figure]


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)
    tables: int = 0
    figures: int = 0

    def add(self, block: Block) -> Block:
        if isinstance(block, Table):
            self.tables += 1
            block.number = self.tables
        elif isinstance(block, Figure):
            self.figures += 1
            block.number = self.figures
        self.blocks.append(block)
        return block

    def heading(self, level: int, text: str) -> None:
        self.add(Heading(level, text))

    def paragraph(self, text: str) -> None:
        self.add(Paragraph(text))

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            self.add(Bullets(list(items)))

    # ------------------------------------------------------------------------------------------ markdown
    def markdown(self, folder: Path) -> str:
        lines = [f"# {self.title}", ""]
        for block in self.blocks:
            if isinstance(block, Heading):
                lines += ["#" * block.level + " " + block.text, ""]
            elif isinstance(block, Paragraph):
                lines += [block.text, ""]
            elif isinstance(block, Bullets):
                lines += [f"- {item}" for item in block.items] + [""]
            elif isinstance(block, Table):
                lines += [f"**Table {block.number}.** {block.caption}", ""] + markdown_table(block) + [""]
            elif isinstance(block, Figure):
                name = block.png.relative_to(folder).as_posix()
                vector = block.png.with_suffix(".svg")
                lines += [f"![Figure {block.number}]({name})", "",
                          f"**Figure {block.number}.** {block.caption}"
                          + (f" (vector: [{vector.name}]({vector.relative_to(folder).as_posix()}))" if vector.exists() else ""), ""]
        return "\n".join(lines)

    # ------------------------------------------------------------------------------------------ HTML
    def html(self) -> str:
        body = [f"<h1>{_inline(self.title)}</h1>"]
        for block in self.blocks:
            if isinstance(block, Heading):
                body.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
            elif isinstance(block, Paragraph):
                body.append(f"<p>{_inline(block.text)}</p>")
            elif isinstance(block, Bullets):
                body.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block.items) + "</ul>")
            elif isinstance(block, Table):
                body.append(html_table(block))
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png.read_bytes()).decode("ascii")
                body.append(
                    f'<figure id="figure-{block.number}"><img src="data:image/png;base64,{data}" '
                    f'alt="Figure {block.number}: {html.escape(block.caption, quote=True)}">'
                    f"<figcaption><b>Figure {block.number}.</b> {_inline(block.caption)}</figcaption></figure>"
                )
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(self.title)}</title>'
                f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")

    def write(self, folder: Path, name: str = "report") -> tuple[Path, Path]:
        """``name``.md and ``name``.html in ``folder``; returns both paths."""
        markdown, page = folder / f"{name}.md", folder / f"{name}.html"
        markdown.write_text(self.markdown(folder) + "\n")
        page.write_text(self.html())
        return markdown, page


def _inline(text: str) -> str:
    return CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text, quote=False))


def markdown_table(table: Table) -> list[str]:
    align = ["---:" if table.numeric(k) else "---" for k in range(len(table.header))]
    return ["| " + " | ".join(_md_cell(cell) for cell in table.header) + " |", "|" + "|".join(align) + "|"] + [
        "| " + " | ".join(_md_cell(shown(cell)) for cell in row) + " |" for row in table.rows
    ]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")  # a pipe inside a cell (|e_p|) would end it


def html_table(table: Table) -> str:
    head = "".join(f"<th>{_inline(cell)}</th>" for cell in table.header)
    rows = []
    for row in table.rows:
        cells = []
        for k, cell in enumerate(row):
            numeric = ' class="number"' if table.numeric(k) else ""
            cells.append(f"<td{numeric}>{_inline(shown(cell))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table id="table-{table.number}"><caption>Table {table.number}. {_inline(table.caption)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _csv_cell(cell: Cell) -> Optional[str]:
    if cell is None or (isinstance(cell, float) and not math.isfinite(cell)):
        return ""
    return repr(cell) if isinstance(cell, float) else CODE.sub(r"\1", str(cell))


def write_table_files(table: Table, stem: Path) -> tuple[Path, Path]:
    """``stem``.csv (every digit, empty cells where there is no value) and ``stem``.md (caption and
    table, rounded) of one table."""
    with stem.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([CODE.sub(r"\1", cell) for cell in table.header])
        writer.writerows([[_csv_cell(cell) for cell in row] for row in table.rows])
    stem.with_suffix(".md").write_text("\n".join([f"**Table {table.number}.** {table.caption}", ""] + markdown_table(table)) + "\n")
    return stem.with_suffix(".csv"), stem.with_suffix(".md")
