"""Attached files through the whole product: uploaded to daphne, read by a real celery
worker, then used by a run whose model (scripted) calls search_attachments and
read_attachment."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from django.conf import settings

from agents.llm.scripted import Reply, ToolCalls
from agents.models import Attachment
from agents.services.conversations import conversation_create
from tests.attachments import samples
from tests.processes import run_ended

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("stored_before"),
]

CONTRACT_PAGES = [
    "Master services agreement between Ada Ltd and Bob plc.",
    "Fees are invoiced monthly in arrears.",
    "Either party may end this agreement with ninety days written notice of termination.",
]


def upload(live_stack, user, conversation, name: str, data: bytes) -> tuple[int, dict]:
    """A multipart POST to daphne as ``user``, as the page's composer sends it."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    csrf = uuid.uuid4().hex
    request = urllib.request.Request(
        f"{live_stack.daphne.url}/api/conversations/{conversation.pk}/attachments/",
        method="POST",
        data=body,
        headers={
            "Cookie": f"{settings.CSRF_COOKIE_NAME}={csrf}; {live_stack.session_cookie(user)}",
            "X-CSRFToken": csrf,
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_until_read(live_stack, user, attachment_id: int, timeout: float = 60.0) -> dict:
    """The file once the worker has read it (polled as the page polls a chip)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = live_stack.http("GET", f"/api/attachments/{attachment_id}/", user)
        assert status == 200, body
        if body["state"] != "reading":
            return body
        time.sleep(0.1)
    raise TimeoutError(
        f"file {attachment_id} still reading:\n{live_stack.worker.log_text()[-3000:]}"
    )


def test_a_pdf_a_docx_and_a_csv_are_read_by_the_worker(live_stack, user):
    conversation = conversation_create(owner=user)
    files = {
        "contract.pdf": samples.pdf(CONTRACT_PAGES),
        "letter.docx": samples.docx(["Dear Ada,", "The owl flies at dawn."]),
        "towns.csv": samples.csv_text(),
    }
    read = {}
    for name, data in files.items():
        status, body = upload(live_stack, user, conversation, name, data)
        assert status == 201, body
        read[name] = wait_until_read(live_stack, user, body["id"])

    assert {name: body["state"] for name, body in read.items()} == dict.fromkeys(files, "ready")
    assert read["contract.pdf"]["parts"] == 3
    assert read["towns.csv"]["parts"] == 61
    refused = upload(live_stack, user, conversation, "letter.pdf", files["letter.docx"])
    assert refused[0] == 400
    assert refused[1]["code"] == "file_type_mismatch"
    assert Attachment.objects.filter(conversation=conversation).count() == 3


def test_a_run_searches_and_reads_the_attached_files(live_stack, user):
    conversation = conversation_create(owner=user)
    for name, data in (
        ("contract.pdf", samples.pdf(CONTRACT_PAGES)),
        ("towns.csv", samples.csv_text()),
    ):
        status, body = upload(live_stack, user, conversation, name, data)
        assert status == 201, body
        assert wait_until_read(live_stack, user, body["id"])["state"] == "ready"
    model = f"files-{uuid.uuid4().hex[:8]}"
    answer = "Ninety days' written notice ends it [contract.pdf p.3]; Quillbury has 424242 people."
    live_stack.model.script(
        model,
        [
            ToolCalls([("search_attachments", {"query": "termination notice"})]),
            ToolCalls([("read_attachment", {"name": "towns.csv", "rows": "61"})]),
            Reply(answer),
        ],
    )
    profile = live_stack.profile(model, mode="tools", tools=())
    conversation.profile = profile
    conversation.save(update_fields=["profile"])

    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "How can the contract end?", "client_id": "q1"})
    frames = sock.receive_until(run_ended)

    observations = [f for f in frames if f["type"] == "step" and f["kind"] == "observation"]
    searched, rows = (observation["text"] for observation in observations)
    assert searched.startswith("[contract.pdf p.3] Either party may end this agreement")
    assert "[towns.csv rows " in rows
    assert "61: Quillbury, Ruritania, 424242" in rows
    assert frames[-1]["type"] == "run.finished"
    assert frames[-1]["message"]["content"] == answer

    first = live_stack.model.requests(model)[0]
    offered = sorted(tool["function"]["name"] for tool in first["tools"])
    assert offered == ["read_attachment", "search_attachments"]
    # The small PDF went into the prompt whole, before the question, its pages labelled.
    prompt = json.dumps(first["messages"])
    assert "[p.3]" in prompt
    assert "ninety days written notice" in prompt
