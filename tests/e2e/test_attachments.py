"""Files in the chat as a user meets them: a PDF attached with the paperclip, a Word file
dropped on the composer and a CSV pasted into it, each chip reaching Ready; then a question
answered from the PDF whose citation opens the right page, and a row citation that opens the
table at that row. Also a refused file: its chip says why and the typed text stays."""

from __future__ import annotations

import base64
import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply, ToolCalls
from agents.models import Attachment
from agents.services.conversations import conversation_create
from tests.attachments import samples
from tests.attachments.storage import stored_before  # noqa: F401 (a fixture)
from tests.attachments.test_worker import CONTRACT_PAGES
from tests.e2e.conftest import MOBILE, Tab
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_chat import ask

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("stored_before"),
]

PDF_MIME = "application/pdf"
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# A File built in the page from base64, put in a DataTransfer, as a drop or a paste carries it.
_TRANSFER = """([name, type, data]) => {
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    const transfer = new DataTransfer();
    transfer.items.add(new File([bytes], name, { type }));
    return transfer;
}"""


def _transfer(page, name: str, mime: str, data: bytes):
    return page.evaluate_handle(_TRANSFER, [name, mime, base64.b64encode(data).decode()])


def attach_by_button(page, name: str, mime: str, data: bytes) -> None:
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach files").click()
    chooser.value.set_files(files=[{"name": name, "mimeType": mime, "buffer": data}])


def attach_by_drop(page, name: str, mime: str, data: bytes) -> None:
    transfer = _transfer(page, name, mime, data)
    page.dispatch_event("#composer", "dragover", {"dataTransfer": transfer})
    page.dispatch_event("#composer", "drop", {"dataTransfer": transfer})


def attach_by_paste(page, name: str, mime: str, data: bytes) -> None:
    transfer = _transfer(page, name, mime, data)
    page.evaluate(
        """(transfer) => document.getElementById('composer-input').dispatchEvent(
            new ClipboardEvent('paste', {clipboardData: transfer, bubbles: true, cancelable: true})
        )""",
        transfer,
    )


def chip(page, name: str):
    return page.locator(".chip").filter(has_text=name)


def test_attach_three_ways_see_ready_and_follow_a_citation_to_its_page(
    stack, open_tab, user, model_name
):
    profile = stack.profile(model_name, mode="tools", tools=())
    answer = (
        "Either side may end it with ninety days' notice [contract.pdf p.3]. "
        "Quillbury is the last town [towns.csv rows 57-61]."
    )
    stack.model.script(
        model_name,
        [ToolCalls([("search_attachments", {"query": "end agreement notice"})]), Reply(answer)],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    page.get_by_label("Message", exact=True).fill("How can the contract end?")

    attach_by_button(page, "contract.pdf", PDF_MIME, samples.pdf(CONTRACT_PAGES))
    attach_by_drop(page, "letter.docx", DOCX_MIME, samples.docx(["The owl flies at dawn."]))
    attach_by_paste(page, "towns.csv", "text/csv", samples.csv_text())

    for name, kind in (("contract.pdf", "PDF"), ("letter.docx", "DOCX"), ("towns.csv", "CSV")):
        expect(chip(page, name)).to_contain_text("Ready")
        expect(chip(page, name)).to_contain_text(kind)
    assert set(
        Attachment.objects.filter(conversation=conversation).values_list("state", flat=True)
    ) == {"ready"}
    assert_accessible(tab)

    page.get_by_label("Message", exact=True).press("Enter")
    expect(page.locator(".chip")).to_have_count(0)  # sent: the chips leave the composer
    citation = page.locator("a.citation", has_text="[contract.pdf p.3]")
    expect(citation).to_be_visible()
    pdf = Attachment.objects.get(conversation=conversation, name="contract.pdf")
    assert citation.get_attribute("href") == f"/files/{pdf.pk}/#page=3"
    opened = page.request.get(citation.get_attribute("href"))
    assert opened.status == 200
    assert opened.headers["content-type"] == PDF_MIME
    # The page the link names is the one that holds the cited sentence.
    assert pdf.chunks.get(page=3).text.startswith("Either party may end this agreement")

    rows = page.locator("a.citation", has_text="[towns.csv rows 57-61]")
    with page.context.expect_page() as opened_rows:
        rows.click()
    table = opened_rows.value
    expect(table.locator("tr.cited")).to_contain_text("Town 56")
    expect(table.locator("#rows-title")).to_contain_text("towns.csv")
    expect(table.locator("tbody")).to_contain_text("Quillbury")
    assert_accessible(Tab(table))
    assert tab.errors == []


def test_a_refused_file_says_why_and_keeps_the_typed_text(stack, open_tab, user, model_name):
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, path=f"/c/{conversation.pk}/", viewport=MOBILE)
    page = tab.page
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    box = page.get_by_label("Message", exact=True)
    box.fill("Please read my encrypted file")

    attach_by_button(page, "secret.pdf", PDF_MIME, samples.encrypted_pdf())
    attach_by_drop(page, "notes.pdf", PDF_MIME, b"plain text pretending")

    expect(chip(page, "secret.pdf")).to_contain_text(re.compile("Failed: .*encrypted"))
    expect(chip(page, "notes.pdf")).to_contain_text("not what its extension says")
    expect(box).to_have_value("Please read my encrypted file")
    assert_accessible(tab)
    chip(page, "secret.pdf").get_by_role("button", name="Remove secret.pdf").click()
    expect(chip(page, "secret.pdf")).to_have_count(0)
    assert not Attachment.objects.filter(conversation=conversation).exists()


def test_files_attached_in_a_new_chat_go_with_its_first_message(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, mode="tools", tools=())
    stack.model.script(model_name, [Reply("It is a letter about an owl [letter.docx].")])
    page = open_tab(user, path="/").page
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    page.get_by_label("Agent").select_option(profile.slug)
    attach_by_button(page, "letter.docx", DOCX_MIME, samples.docx(["The owl flies at dawn."]))
    expect(chip(page, "letter.docx")).to_contain_text("Ready")

    ask(page, "What is this file?")

    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    citation = page.locator("a.citation", has_text="[letter.docx]")
    expect(citation).to_be_visible()
    letter = Attachment.objects.get(owner=user, name="letter.docx")
    assert citation.get_attribute("href") == f"/files/{letter.pk}/"
    first = stack.model.requests(model_name)[0]
    assert "The owl flies at dawn." in str(first["messages"])
