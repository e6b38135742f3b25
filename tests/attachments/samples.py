"""Files made in the test, good and bad: PDFs with real text on numbered pages (pypdf), a
Word file (python-docx), a CSV, and the uploads that must be refused."""

from __future__ import annotations

import io
import zipfile

from pypdf import PdfWriter
from pypdf.generic import (
    DecodedStreamObject,
    DictionaryObject,
    NameObject,
)


def pdf(pages: list[str]) -> bytes:
    """A PDF whose page N shows the text ``pages[N-1]`` (Helvetica, one line)."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    font_ref = writer._add_object(font)
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 11 Tf 40 700 Td ({escaped}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref})}
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def encrypted_pdf() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    writer.encrypt("a password")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def long_pdf(pages: int) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=100, height=100)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx(paragraphs: list[str]) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx() -> bytes:
    """A real Word file with one more part that unpacks from a few kilobytes to many MB."""
    source = zipfile.ZipFile(io.BytesIO(docx(["An innocent looking letter."])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            bomb.writestr(item, source.read(item))
        bomb.writestr("word/media/padding.bin", b"\0" * (40 * 1024 * 1024))
    return out.getvalue()


def csv_text() -> bytes:
    rows = ["city,country,population"]
    rows += [f"Town {number},Testland,{number * 1000}" for number in range(1, 60)]
    rows.append("Quillbury,Ruritania,424242")
    return ("\n".join(rows) + "\n").encode()


def png_with_text(text: str) -> bytes:
    """A picture of ``text`` in large black letters (Pillow comes with python-pptx)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (60 + 28 * len(text), 160), "white")
    ImageDraw.Draw(image).text((20, 40), text, fill="black", font=ImageFont.load_default(size=48))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def xlsx(rows: list[list[object]], title: str = "Sales") -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def pptx(slides: list[str]) -> bytes:
    import pptx as python_pptx

    deck = python_pptx.Presentation()
    for text in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = text
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()
