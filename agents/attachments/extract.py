"""The text of an accepted file (``files.judge`` said what it is), cut into passages that
each know where they are: a PDF's page, a deck's slide, a table's rows.

Running text (Word, Markdown, plain text, HTML, an image's OCR) is cut at paragraphs like
the knowledge base's (``agents/services/knowledge.chunk_text``); a table is cut into runs
of rows, each with the header row in front so a passage reads on its own.
"""

from __future__ import annotations

import csv
import html.parser
import io
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.conf import settings

from agents.services.knowledge import chunk_text

TABLE_PASSAGE_CHARS = 1500
OCR_TIMEOUT_SECONDS = 120


class ExtractError(ValueError):
    """The file cannot be read; the message (English, stored) says why."""


@dataclass(frozen=True)
class Passage:
    text: str
    label: str = ""  # as cited after the file name: "p.3", "slide 2", "rows 2-40"
    page: int | None = None
    row: int | None = None


@dataclass(frozen=True)
class Extracted:
    passages: list[Passage]
    parts: int | None  # pages, slides or rows read


def extract(*, kind: str, data: bytes) -> Extracted:
    reader = _READERS[kind]
    return reader(data)


def _running_text(text: str) -> list[Passage]:
    return [Passage(chunk) for chunk in chunk_text(text)]


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig")


def _pdf(data: bytes) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        passages: list[Passage] = []
        count = len(reader.pages)
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            passages.extend(
                Passage(chunk, label=f"p.{number}", page=number) for chunk in chunk_text(text)
            )
    except (PdfReadError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ExtractError(f"the PDF could not be read: {exc}") from None
    if not passages:
        raise ExtractError("the PDF has no text to read (is it a scanned image?)")
    return Extracted(passages, count)


def _docx(data: bytes) -> Extracted:
    import docx

    document = docx.Document(io.BytesIO(data))
    paragraphs = [paragraph.text for paragraph in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            paragraphs.append(" | ".join(cell.text.strip() for cell in row.cells))
    return Extracted(_running_text("\n\n".join(paragraphs)), None)


def _pptx(data: bytes) -> Extracted:
    import pptx

    deck = pptx.Presentation(io.BytesIO(data))
    passages: list[Passage] = []
    count = 0
    for number, slide in enumerate(deck.slides, start=1):
        count = number
        texts = [
            shape.text_frame.text
            for shape in slide.shapes
            if shape.has_text_frame and shape.text_frame.text.strip()
        ]
        passages.extend(
            Passage(chunk, label=f"slide {number}", page=number)
            for chunk in chunk_text("\n\n".join(texts))
        )
    return Extracted(passages, count)


def _xlsx(data: bytes) -> Extracted:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    passages: list[Passage] = []
    total = 0
    try:
        for sheet in workbook.worksheets:
            rows = (
                ["" if value is None else str(value) for value in row]
                for row in sheet.iter_rows(values_only=True)
            )
            sheet_passages, read = _table_passages(rows, prefix=f"{sheet.title} ")
            passages.extend(sheet_passages)
            total += read
    finally:
        workbook.close()
    return Extracted(passages, total)


def _csv(data: bytes) -> Extracted:
    text = _decode(data)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192])
    except csv.Error:
        dialect = csv.excel
    passages, read = _table_passages(csv.reader(io.StringIO(text), dialect), prefix="")
    return Extracted(passages, read)


def _table_passages(rows: Iterable[list[str]], *, prefix: str) -> tuple[list[Passage], int]:
    """Runs of rows under the header; rows are numbered as a spreadsheet shows them (the
    header is row 1)."""
    limit = settings.CHAT_ATTACHMENT_MAX_ROWS
    iterator: Iterator[list[str]] = iter(rows)
    header = next(iterator, None)
    if header is None:
        return [], 0
    head = ", ".join(header)
    passages: list[Passage] = []
    lines: list[str] = []
    first = 2
    number = 1
    for number, row in enumerate(iterator, start=2):
        if number - 1 > limit:
            raise ExtractError(f"the table has more than {limit} rows")
        if not any(cell.strip() for cell in row):
            continue
        if not lines:
            first = number
        lines.append(f"{number}: " + ", ".join(row))
        if sum(len(line) for line in lines) > TABLE_PASSAGE_CHARS:
            passages.append(_rows_passage(prefix, head, lines, first, number))
            lines = []
    if lines:
        passages.append(_rows_passage(prefix, head, lines, first, number))
    if not passages and head.strip():
        passages.append(Passage(head, label=f"{prefix}row 1", row=1))
    return passages, number


def _rows_passage(prefix: str, head: str, lines: list[str], first: int, last: int) -> Passage:
    label = f"{prefix}row {first}" if first == last else f"{prefix}rows {first}-{last}"
    return Passage("\n".join([f"1: {head}", *lines]), label=label, row=first)


class _TextOfHtml(html.parser.HTMLParser):
    """The text a reader sees: no scripts, styles or markup; blocks become paragraphs."""

    _SKIPPED = {"script", "style", "template", "noscript", "head"}
    _BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIPPED:
            self.skipping += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIPPED and self.skipping:
            self.skipping -= 1
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def _html(data: bytes) -> Extracted:
    parser = _TextOfHtml()
    parser.feed(_decode(data))
    parser.close()
    return Extracted(_running_text("".join(parser.parts)), None)


def _plain(data: bytes) -> Extracted:
    return Extracted(_running_text(_decode(data)), None)


def _image(data: bytes) -> Extracted:
    try:
        completed = subprocess.run(  # noqa: S603 (a fixed program; the image goes on stdin)
            [settings.CHAT_OCR_COMMAND, "stdin", "stdout", "-l", settings.CHAT_OCR_LANGUAGES],
            input=data,
            capture_output=True,
            timeout=OCR_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExtractError(f"OCR could not run: {exc}") from None
    if completed.returncode != 0:
        detail = completed.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise ExtractError(f"OCR failed: {' '.join(detail) or completed.returncode}")
    text = completed.stdout.decode("utf-8", "replace")
    if not text.strip():
        raise ExtractError("no text was found in the image")
    return Extracted(_running_text(text), None)


_READERS = {
    "pdf": _pdf,
    "docx": _docx,
    "xlsx": _xlsx,
    "pptx": _pptx,
    "csv": _csv,
    "markdown": _plain,
    "text": _plain,
    "html": _html,
    "png": _image,
    "jpeg": _image,
}
