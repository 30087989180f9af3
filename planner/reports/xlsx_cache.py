"""Save an openpyxl workbook with each formula's computed value stored beside it.

openpyxl writes ``<c r="B5"><f>SUM(..)</f><v/></c>``: a formula with an empty cached value,
which pandas, previews and viewers show as blank. We keep openpyxl (its charts, tables and
print setup are what the report is built with; switching writers would mean rewriting
them) and fill the empty ``<v/>`` of every formula cell with the value
:mod:`planner.reports.formula_eval` computes, in the saved zip. The workbook still asks
Excel and LibreOffice to recalculate on open, so an edited input is never stale.
"""

from __future__ import annotations

import io
import math
import posixpath
import re
import zipfile
from typing import Any
from xml.sax.saxutils import escape

from openpyxl.workbook.workbook import Workbook

from planner.reports.formula_eval import XlError, evaluate_all

_SHEET = re.compile(r'<sheet [^>]*?name="([^"]*)"[^>]*?r:id="([^"]*)"')
_REL = re.compile(
    r'<Relationship [^>]*?Id="([^"]*)"[^>]*?Target="([^"]*)"|'
    r'<Relationship [^>]*?Target="([^"]*)"[^>]*?Id="([^"]*)"'
)
_CELL = re.compile(r'<c r="([A-Z]+[0-9]+)"((?: [a-zA-Z]+="[^"]*")*)><f>(.*?)</f><v\s*/></c>', re.S)


def _unescape_attr(s: str) -> str:
    return (
        s.replace("&quot;", '"')
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
    )


def _sheet_paths(z: zipfile.ZipFile) -> dict[str, str]:
    """Sheet name -> path of its XML part in the zip."""
    book = z.read("xl/workbook.xml").decode("utf-8")
    rels = z.read("xl/_rels/workbook.xml.rels").decode("utf-8")
    target: dict[str, str] = {}
    for m in _REL.finditer(rels):
        rid, tgt = (m[1], m[2]) if m[1] else (m[4], m[3])
        path = tgt.lstrip("/") if tgt.startswith("/") else posixpath.join("xl", tgt)
        target[rid] = posixpath.normpath(path)
    return {_unescape_attr(name): target[rid] for name, rid in _SHEET.findall(book)}


def _cached(attrs: str, value: Any) -> tuple[str, str]:
    """The cell's attributes (with the result type) and its ``<v>`` for a computed value."""
    attrs = re.sub(r' t="[^"]*"', "", attrs)
    if isinstance(value, XlError):
        return attrs + ' t="e"', f"<v>{escape(value.code)}</v>"
    if isinstance(value, bool):
        return attrs + ' t="b"', f"<v>{int(value)}</v>"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return attrs + ' t="e"', "<v>#NUM!</v>"
        return attrs, f"<v>{float(value)!r}</v>"
    return attrs + ' t="str"', f"<v>{escape(str(value))}</v>"


def _fill_sheet(xml: str, values: dict[str, Any]) -> str:
    def repl(m: re.Match[str]) -> str:
        ref, attrs, formula = m[1], m[2], m[3]
        if ref not in values:
            return m[0]
        attrs, v = _cached(attrs, values[ref])
        return f'<c r="{ref}"{attrs}><f>{formula}</f>{v}</c>'

    return _CELL.sub(repl, xml)


def save_with_values(wb: Workbook) -> bytes:
    """The ``.xlsx`` bytes of ``wb``, every formula cell carrying its computed value."""
    values = evaluate_all(wb)
    raw = io.BytesIO()
    wb.save(raw)
    src = zipfile.ZipFile(io.BytesIO(raw.getvalue()))
    paths = {p: values.get(name, {}) for name, p in _sheet_paths(src).items()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename in paths and paths[info.filename]:
                data = _fill_sheet(data.decode("utf-8"), paths[info.filename]).encode("utf-8")
            dst.writestr(info, data)
    return out.getvalue()
