"""Attaching files through the API: what is accepted, what is refused and why, who may read
a file, and what deleting takes away. The reading itself is the service the worker's task
calls (tests/attachments/test_worker.py runs it in a real worker)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from agents.attachments.files import ocr_available
from agents.attachments.selectors import attachment_search
from agents.models import Attachment, AttachmentChunk, Message
from agents.services.attachments import attachment_extract
from agents.services.conversations import conversation_create, conversation_delete
from agents.services.shares import share_create
from tests.attachments import samples
from tests.attachments.storage import stored_names

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_before")]


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _upload(client: Client, conversation, name: str, data: bytes):
    return client.post(
        f"/api/conversations/{conversation.pk}/attachments/",
        {"file": SimpleUploadedFile(name, data)},
    )


@pytest.fixture
def conversation(user):
    return conversation_create(owner=user)


def test_a_pdf_is_stored_read_into_pages_and_listed(user, conversation):
    client = _client(user)
    data = samples.pdf(["Intro page", "The termination clause needs ninety days notice", "End"])

    response = _upload(client, conversation, "contract.pdf", data)

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["kind"], body["state"], body["parts"]) == (
        "contract.pdf", "pdf", "reading", 3,
    )  # fmt: skip
    attachment = Attachment.objects.get(pk=body["id"])
    with attachment.file.open("rb") as stored:
        assert stored.read() == data
    # The stored name is random and has no extension to be executed by.
    assert "contract" not in attachment.file.name
    assert "." not in attachment.file.name

    attachment_extract(attachment_id=attachment.pk)
    attachment_extract(attachment_id=attachment.pk)  # twice: nothing doubles

    listed = client.get(f"/api/conversations/{conversation.pk}/attachments/").json()
    assert [(item["name"], item["state"]) for item in listed["attachments"]] == [
        ("contract.pdf", "ready")
    ]
    chunks = list(AttachmentChunk.objects.filter(attachment=attachment).order_by("position"))
    assert [(chunk.label, chunk.page) for chunk in chunks] == [("p.1", 1), ("p.2", 2), ("p.3", 3)]
    assert "ninety days" in chunks[1].text


def test_a_docx_and_a_csv_are_read_with_their_locations(user, conversation):
    client = _client(user)
    word = _upload(
        client, conversation, "letter.docx", samples.docx(["Dear Ada,", "The owl flies at dawn."])
    )
    table = _upload(client, conversation, "towns.csv", samples.csv_text())
    assert (word.status_code, table.status_code) == (201, 201)
    for response in (word, table):
        attachment_extract(attachment_id=response.json()["id"])

    letter = Attachment.objects.get(pk=word.json()["id"])
    towns = Attachment.objects.get(pk=table.json()["id"])
    assert letter.state == towns.state == "ready"
    assert "owl flies at dawn" in letter.chunks.get().text
    last = towns.chunks.order_by("-position").first()
    # Rows are numbered as a spreadsheet shows them, the header (row 1) in every passage.
    assert last.text.startswith("1: city, country, population")
    assert "61: Quillbury, Ruritania, 424242" in last.text
    assert last.label.startswith("rows ")
    assert last.row is not None


# (case, file name, its bytes, refusal code, HTTP status, words the message must hold)
BAD_UPLOADS = [
    ("oversize", "big.txt", lambda: b"a" * 2048, "file_too_large", 413, "at most"),
    ("wrong type", "tool.exe", lambda: b"MZ\x90\x00", "file_type_not_allowed", 400,
     "cannot be attached"),
    ("lying extension", "notes.pdf", lambda: b"just some text", "file_type_mismatch", 400,
     "not what its extension says"),
    ("a csv that is a PDF", "sheet.csv", lambda: samples.pdf(["x"]), "file_type_mismatch", 400,
     "PDF"),
    ("zip bomb inside a docx", "letter.docx", samples.zip_bomb_docx, "file_unsafe", 400,
     "compression bomb"),
    ("encrypted pdf", "secret.pdf", samples.encrypted_pdf, "file_encrypted", 400, "encrypted"),
    ("5,000-page pdf", "endless.pdf", lambda: samples.long_pdf(5000), "file_too_many_pages", 400,
     "5000 pages"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "name", "make", "code", "status", "said"),
    BAD_UPLOADS,
    ids=[case[0] for case in BAD_UPLOADS],
)
@override_settings(CHAT_ATTACHMENT_MAX_BYTES=1024)
def test_a_bad_upload_is_refused_clearly_and_stores_nothing(
    user, conversation, stored_before, label, name, make, code, status, said
):
    data = make()
    if code != "file_too_large":
        # The other refusals must not be the size limit's.
        with override_settings(CHAT_ATTACHMENT_MAX_BYTES=len(data) + 1):
            response = _upload(_client(user), conversation, name, data)
    else:
        response = _upload(_client(user), conversation, name, data)

    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert name in body["message"]
    assert said in body["message"]
    assert not Attachment.objects.exists()
    assert stored_names() == stored_before


def test_a_refused_file_loses_nothing_else(user, conversation):
    """The question the user typed goes its own way (a message), whatever a file's fate."""
    client = _client(user)
    refused = _upload(client, conversation, "secret.pdf", samples.encrypted_pdf())
    assert refused.status_code == 400
    kept = _upload(client, conversation, "notes.txt", b"kept notes")
    assert kept.status_code == 201
    assert list(Attachment.objects.values_list("name", flat=True)) == ["notes.txt"]


@override_settings(CHAT_ATTACHMENTS_PER_MESSAGE=2)
def test_files_per_message_are_counted_since_the_last_question(user, conversation):
    client = _client(user)
    assert _upload(client, conversation, "a.txt", b"a").status_code == 201
    assert _upload(client, conversation, "b.txt", b"b").status_code == 201
    third = _upload(client, conversation, "c.txt", b"c")
    assert (third.status_code, third.json()["code"]) == (400, "too_many_files")
    Message.objects.create(conversation=conversation, role="user", content="question")
    assert _upload(client, conversation, "c.txt", b"c").status_code == 201


@override_settings(CHAT_OCR_COMMAND="no-such-ocr-program")
def test_an_image_is_refused_where_ocr_is_not_installed(user, conversation):
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
    response = _upload(_client(user), conversation, "scan.png", png)
    assert (response.status_code, response.json()["code"]) == (400, "ocr_unavailable")


def test_another_user_gets_404_for_the_file_and_its_api(user, other_user, conversation):
    created = _upload(_client(user), conversation, "mine.txt", b"private words").json()
    stranger = _client(other_user)

    assert stranger.get(f"/files/{created['id']}/").status_code == 404
    assert stranger.get(f"/api/attachments/{created['id']}/").status_code == 404
    assert stranger.delete(f"/api/attachments/{created['id']}/").status_code == 404
    assert stranger.get(f"/api/conversations/{conversation.pk}/attachments/").status_code == 404
    assert _upload(stranger, conversation, "x.txt", b"x").status_code == 404
    assert Client().get(f"/files/{created['id']}/").status_code == 302  # to sign in

    own = _client(user).get(f"/files/{created['id']}/")
    assert own.status_code == 200
    assert b"".join(own.streaming_content) == b"private words"
    assert own["Content-Type"] == "text/plain; charset=utf-8"
    assert own["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in own["Content-Security-Policy"]
    assert 'filename="mine.txt"' in own["Content-Disposition"]


def test_html_is_served_as_text_and_a_pdf_inline(user, conversation):
    client = _client(user)
    page = _upload(client, conversation, "page.html", b"<script>alert(1)</script><p>hi</p>").json()
    paper = _upload(client, conversation, "paper.pdf", samples.pdf(["one"])).json()
    served = client.get(f"/files/{page['id']}/")
    assert served["Content-Type"] == "text/plain; charset=utf-8"
    pdf = client.get(f"/files/{paper['id']}/")
    assert pdf["Content-Type"] == "application/pdf"
    assert pdf["Content-Disposition"].startswith("inline")

    attachment_extract(attachment_id=page["id"])
    text = Attachment.objects.get(pk=page["id"]).chunks.get().text
    assert text == "hi"  # the script's text is not read


def test_a_share_reader_gets_the_shared_conversations_files_only(user, other_user, conversation):
    created = _upload(_client(user), conversation, "shared.txt", b"for readers").json()
    elsewhere = conversation_create(owner=user)
    hidden = _upload(_client(user), elsewhere, "hidden.txt", b"not shared").json()
    share, _ = share_create(conversation=conversation)
    reader = _client(other_user)

    response = reader.get(f"/s/{share.token}/files/{created['id']}/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"for readers"
    assert reader.get(f"/s/{share.token}/files/{hidden['id']}/").status_code == 404
    share.revoked_at = share.created_at
    share.save()
    assert reader.get(f"/s/{share.token}/files/{created['id']}/").status_code == 404


def test_deleting_the_conversation_deletes_files_passages_and_bytes(
    user, conversation, django_capture_on_commit_callbacks
):
    client = _client(user)
    ids = [
        _upload(client, conversation, "a.pdf", samples.pdf(["alpha", "beta"])).json()["id"],
        _upload(client, conversation, "b.csv", samples.csv_text()).json()["id"],
    ]
    for attachment_id in ids:
        attachment_extract(attachment_id=attachment_id)
    names = set(Attachment.objects.values_list("file", flat=True))
    assert AttachmentChunk.objects.exists()
    assert names <= stored_names()

    with django_capture_on_commit_callbacks(execute=True):
        conversation_delete(conversation=conversation)

    assert not Attachment.objects.exists()
    assert not AttachmentChunk.objects.exists()
    assert not names & stored_names()


def test_removing_a_chip_deletes_the_file(user, conversation, django_capture_on_commit_callbacks):
    client = _client(user)
    created = _upload(client, conversation, "gone.txt", b"soon gone").json()
    name = Attachment.objects.get(pk=created["id"]).file.name
    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(f"/api/attachments/{created['id']}/").status_code == 204
    assert not Attachment.objects.exists()
    assert name not in stored_names()


@pytest.mark.skipif(not ocr_available(), reason="Debian's tesseract-ocr is not installed")
def test_an_image_is_read_by_ocr_where_tesseract_is_installed(user, conversation):
    created = _upload(
        _client(user),
        conversation,
        "receipt.png",
        samples.png_with_text("Invoice total 4242 euros"),
    )
    assert created.status_code == 201, created.content
    attachment_extract(attachment_id=created.json()["id"])
    attachment = Attachment.objects.get(pk=created.json()["id"])
    assert attachment.state == "ready", attachment.error
    assert "Invoice total 4242" in attachment.chunks.get().text


def test_a_spreadsheet_and_a_deck_are_read_with_sheet_rows_and_slides(user, conversation):
    client = _client(user)
    sheet = _upload(
        client, conversation, "sales.xlsx",
        samples.xlsx([["month", "units"], ["January", 12], ["February", 30]]),
    ).json()  # fmt: skip
    deck = _upload(
        client, conversation, "plan.pptx", samples.pptx(["Kick-off", "Launch in May"])
    ).json()
    for created in (sheet, deck):
        attachment_extract(attachment_id=created["id"])

    rows = Attachment.objects.get(pk=sheet["id"]).chunks.get()
    assert (rows.label, rows.row) == ("Sales rows 2-3", 2)
    assert "3: February, 30" in rows.text
    slides = list(Attachment.objects.get(pk=deck["id"]).chunks.order_by("position"))
    assert [(s.label, s.page) for s in slides] == [("slide 1", 1), ("slide 2", 2)]
    assert "Launch in May" in slides[1].text


@pytest.mark.smoke  # run on SQLite too (make test-sqlite): the search without tsvector
def test_search_ranks_the_conversations_passages_and_finds_words_it_cannot_split(
    user, other_user, conversation, settings
):
    # By words alone: search by meaning would add the nearest passages
    # (tests/services/test_search_by_meaning.py).
    settings.CHAT_EMBEDDINGS = "off"
    client = _client(user)
    created = _upload(
        client, conversation, "contract.pdf",
        samples.pdf(["Fees are paid monthly.", "Termination needs ninety days notice."]),
    ).json()  # fmt: skip
    notes = _upload(client, conversation, "notes.txt", "合同终止需要九十天通知。".encode()).json()
    elsewhere = conversation_create(owner=other_user)
    theirs = _upload(
        _client(other_user), elsewhere, "other.txt", b"termination of another deal"
    ).json()
    for attachment_id in (created["id"], notes["id"], theirs["id"]):
        attachment_extract(attachment_id=attachment_id)

    hits = attachment_search(conversation_id=conversation.pk, query="termination notice")
    assert [hit.citation for hit in hits] == ["[contract.pdf p.2]"]
    chinese = attachment_search(conversation_id=conversation.pk, query="合同终止")
    assert [hit.citation for hit in chinese] == ["[notes.txt]"]
    assert attachment_search(conversation_id=conversation.pk, query="   ") == []


def test_deleting_the_user_deletes_their_stored_bytes(
    user, conversation, django_capture_on_commit_callbacks
):
    _upload(_client(user), conversation, "mine.txt", b"mine")
    name = Attachment.objects.get().file.name
    with django_capture_on_commit_callbacks(execute=True):
        user.delete()
    assert name not in stored_names()


def test_a_delete_that_rolls_back_keeps_the_bytes(
    user, conversation, django_capture_on_commit_callbacks
):
    from django.db import transaction

    _upload(_client(user), conversation, "kept.txt", b"kept")
    name = Attachment.objects.get().file.name

    def delete_then_change_our_mind() -> None:
        with transaction.atomic():
            conversation_delete(conversation=conversation)
            raise RuntimeError("changed our mind")

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        delete_then_change_our_mind()
    assert Attachment.objects.filter(file=name).exists()
    assert name in stored_names()
