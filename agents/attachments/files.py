"""What an uploaded file is, judged from its content, and whether it may be read.

The extension names what the user says the file is; the first bytes (and, for an Office
file, the zip's table of contents) say what it is. The two must agree, and the content
decides. Every check here reads only what it needs: a zip's declared sizes before anything
is unpacked, a PDF's page tree without its pages' content.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import PurePath

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agents.protocol import RefusalCode

# The extensions each kind answers to. The text kinds cannot be told apart by content
# (a CSV is plain text), so among them the extension chooses, once the content is text.
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "pdf": (".pdf",),
    "docx": (".docx",),
    "xlsx": (".xlsx",),
    "pptx": (".pptx",),
    "csv": (".csv",),
    "markdown": (".md", ".markdown"),
    "text": (".txt", ".text", ".log", ""),
    "html": (".html", ".htm"),
    "png": (".png",),
    "jpeg": (".jpg", ".jpeg"),
}
TEXT_KINDS = ("csv", "markdown", "text", "html")
IMAGE_KINDS = ("png", "jpeg")
# The part of the package each Office kind must have.
_OFFICE_MAIN_PART = {
    "docx": "word/document.xml",
    "xlsx": "xl/workbook.xml",
    "pptx": "ppt/presentation.xml",
}
# What a browser is told the stored bytes are: never anything it would run or render as a
# page of this site (HTML is served as plain text).
CONTENT_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "csv": "text/csv; charset=utf-8",
    "markdown": "text/plain; charset=utf-8",
    "text": "text/plain; charset=utf-8",
    "html": "text/plain; charset=utf-8",
    "png": "image/png",
    "jpeg": "image/jpeg",
}


class FileRefused(ValueError):
    """The file is not stored; ``message`` says why, in the user's language."""

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class FileVerdict:
    kind: str
    parts: int | None  # pages of a PDF; None where counting needs the whole read


def clean_name(name: str) -> str:
    """The file's own name without any folder, control characters or quotes."""
    base = PurePath(name.replace("\\", "/")).name
    base = "".join(ch for ch in base if ch.isprintable() and ch not in '"<>')
    return base.strip()[:200] or "file"


def judge_size_only(*, name: str, size: int) -> None:
    """Refuse a file over the size limit before its bytes are read."""
    if size > settings.CHAT_ATTACHMENT_MAX_BYTES:
        raise FileRefused(
            RefusalCode.FILE_TOO_LARGE,
            _("%(name)s is %(size)s; files can be at most %(limit)s.")
            % {
                "name": clean_name(name),
                "size": human_size(size),
                "limit": human_size(settings.CHAT_ATTACHMENT_MAX_BYTES),
            },
        )


def judge(*, name: str, data: bytes) -> FileVerdict:
    """The kind of ``data`` if it may be stored; raises ``FileRefused`` otherwise."""
    judge_size_only(name=name, size=len(data))
    claimed = kind_of_extension(name)
    allowed = set(settings.CHAT_ATTACHMENT_TYPES)
    if claimed is None or claimed not in allowed:
        raise FileRefused(
            RefusalCode.FILE_TYPE_NOT_ALLOWED,
            _("%(name)s: this type of file cannot be attached. Allowed: %(kinds)s.")
            % {"name": name, "kinds": allowed_extensions_text()},
        )
    actual = kind_of_content(data)
    if actual == "text" and claimed in TEXT_KINDS:
        actual = claimed
    if actual != claimed:
        raise FileRefused(
            RefusalCode.FILE_TYPE_MISMATCH,
            _("%(name)s is not what its extension says (its content is %(actual)s).")
            % {"name": name, "actual": describe_kind(actual)},
        )
    if claimed in _OFFICE_MAIN_PART:
        check_zip(name=name, data=data)
    parts = None
    if claimed == "pdf":
        parts = check_pdf(name=name, data=data)
    if claimed in IMAGE_KINDS and not ocr_available():
        raise FileRefused(
            RefusalCode.OCR_UNAVAILABLE,
            _(
                "%(name)s: text cannot be read from images on this server (tesseract is not "
                "installed)."
            )
            % {"name": name},
        )
    return FileVerdict(kind=claimed, parts=parts)


def kind_of_extension(name: str) -> str | None:
    suffix = PurePath(name).suffix.lower()
    for kind, suffixes in EXTENSIONS.items():
        if suffix in suffixes:
            return kind
    return None


def kind_of_content(data: bytes) -> str | None:
    """``pdf``, ``png``, ``jpeg``, an Office kind, ``text``, or None for anything else."""
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(b"PK\x03\x04"):
        try:
            names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
        except (zipfile.BadZipFile, ValueError):
            return None
        if "[Content_Types].xml" in names:
            for kind, part in _OFFICE_MAIN_PART.items():
                if part in names:
                    return kind
        return None
    return "text" if looks_like_text(data) else None


def looks_like_text(data: bytes) -> bool:
    if b"\x00" in data[:65536]:
        return False
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return True


def check_zip(*, name: str, data: bytes) -> None:
    """Refuse an Office file whose zip would unpack to too much, judged from the sizes its
    table of contents declares (the reader stops at those sizes, so they cannot lie)."""
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError):
        raise FileRefused(
            RefusalCode.FILE_UNREADABLE,
            _("%(name)s is damaged and cannot be read.") % {"name": name},
        ) from None
    unpacked = sum(member.file_size for member in members)
    packed = sum(member.compress_size for member in members) or 1
    limit = settings.CHAT_ATTACHMENT_MAX_UNPACKED_BYTES
    if unpacked > limit or unpacked / packed > settings.CHAT_ATTACHMENT_MAX_PACKING_RATIO:
        raise FileRefused(
            RefusalCode.FILE_UNSAFE,
            _(
                "%(name)s would unpack to %(size)s: that is a compression bomb, not a "
                "document, and it was not opened."
            )
            % {"name": name, "size": human_size(unpacked)},
        )


def check_pdf(*, name: str, data: bytes) -> int:
    """The PDF's page count; refuses an encrypted one, an unreadable one, a too long one."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
        pages = 0 if encrypted else len(reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError, RecursionError):
        raise FileRefused(
            RefusalCode.FILE_UNREADABLE,
            _("%(name)s is damaged and cannot be read.") % {"name": name},
        ) from None
    if encrypted:
        raise FileRefused(
            RefusalCode.FILE_ENCRYPTED,
            _("%(name)s is encrypted. Remove its password, then attach it again.") % {"name": name},
        )
    limit = settings.CHAT_ATTACHMENT_MAX_PAGES
    if pages > limit:
        raise FileRefused(
            RefusalCode.FILE_TOO_MANY_PAGES,
            ngettext(
                "%(name)s has %(pages)s pages; files can have at most %(limit)s page.",
                "%(name)s has %(pages)s pages; files can have at most %(limit)s pages.",
                limit,
            )
            % {"name": name, "pages": pages, "limit": limit},
        )
    return pages


def ocr_available() -> bool:
    return shutil.which(settings.CHAT_OCR_COMMAND) is not None


def allowed_extensions_text() -> str:
    allowed = [kind for kind in EXTENSIONS if kind in settings.CHAT_ATTACHMENT_TYPES]
    return ", ".join(suffix for kind in allowed for suffix in EXTENSIONS[kind] if suffix)


def describe_kind(kind: str | None) -> str:
    if kind is None:
        return _("not a type that can be attached")
    if kind == "text":
        return _("plain text")
    return {"docx": "Word", "xlsx": "Excel", "pptx": "PowerPoint"}.get(kind, kind.upper())


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
