"""The python tool's files: the conversation's inputs in /data, and what the code saves,
stored and served to the conversation's owner only."""

from __future__ import annotations

import re

import pytest
from django.core.files.base import ContentFile
from django.test import Client

from agents.attachments import selectors as attachment_selectors
from agents.models import Attachment, Conversation, SandboxFile
from agents.services.sandbox import PNG_SIGNATURE

pytestmark = pytest.mark.django_db

CHART = (
    "import pandas as pd, matplotlib.pyplot as plt\n"
    "frame = pd.DataFrame({'month': ['Jan', 'Feb', 'Mar'], 'sales': [3, 5, 4]})\n"
    "frame.plot(x='month', y='sales', kind='bar')\n"
    "frame.to_csv('sales.csv', index=False)\n"
    "print('drawn')"
)


def _urls(observation: str) -> dict[str, str]:
    return dict(re.findall(r"^- (\S+) \([^)]*\): (/sandbox-files/\S+)$", observation, re.M))


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_pandas_chart_comes_back_as_a_figure_only_its_owner_can_see(
    python_tool, user, other_user
):
    conversation = Conversation.objects.create(owner=user)
    observation = python_tool(conversation=conversation).run(CHART)

    assert observation.startswith("Files saved (the user sees them under this step):\n- ")
    assert observation.endswith("\n\nOutput:\ndrawn")
    urls = _urls(observation)
    assert sorted(urls) == ["figure-1.png", "sales.csv"]
    figure = _client(user).get(urls["figure-1.png"])
    assert figure.status_code == 200
    assert figure["Content-Type"] == "image/png"
    assert figure["Content-Disposition"] == 'inline; filename="figure-1.png"'
    assert figure["X-Content-Type-Options"] == "nosniff"
    assert b"".join(figure.streaming_content).startswith(PNG_SIGNATURE)
    table = _client(user).get(urls["sales.csv"])
    assert table["Content-Type"] == "application/octet-stream"
    assert table["Content-Disposition"] == 'attachment; filename="sales.csv"'
    assert b"".join(table.streaming_content) == b"month,sales\nJan,3\nFeb,5\nMar,4\n"

    for url in urls.values():
        assert _client(other_user).get(url).status_code == 404
        assert Client().get(url).status_code == 302  # to the sign-in page
    stored = SandboxFile.objects.get(name="figure-1.png")
    wrong_name = f"/sandbox-files/{stored.pk}/other.png"
    assert _client(user).get(wrong_name).status_code == 404


def test_a_file_named_png_that_is_not_one_is_only_a_download(python_tool, user):
    conversation = Conversation.objects.create(owner=user)
    observation = python_tool(conversation=conversation).run(
        "open('page.png', 'w').write('<html><script>alert(1)</script>')"
    )
    response = _client(user).get(_urls(observation)["page.png"])
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")


def test_a_link_the_code_leaves_is_not_copied(python_tool, user):
    conversation = Conversation.objects.create(owner=user)
    observation = python_tool(conversation=conversation).run(
        "import os\nos.symlink('/etc/hostname', 'leak.png')\nopen('ok.txt', 'w').write('ok')"
    )
    assert list(_urls(observation)) == ["ok.txt"]
    assert list(SandboxFile.objects.values_list("name", flat=True)) == ["ok.txt"]


def test_the_conversations_files_are_read_only_in_data(python_tool, user, tmp_path, monkeypatch):
    # The files a run may read, given here as bytes and as a path.
    notes = tmp_path / "notes.txt"
    notes.write_text("from a path")
    conversation = Conversation.objects.create(owner=user)
    asked: list[int] = []

    def files(conversation_id: int) -> list[tuple[str, str | bytes]]:
        asked.append(conversation_id)
        return [("table.csv", b"a,b\n1,2\n3,4\n"), ("notes.txt", str(notes))]

    monkeypatch.setattr(attachment_selectors, "conversation_sandbox_files", files)
    observation = python_tool(conversation=conversation).run(
        "import os, pandas as pd\n"
        "print(sorted(os.listdir('/data')))\n"
        "print(int(pd.read_csv('/data/table.csv').b.sum()), open('/data/notes.txt').read())\n"
        "try:\n    open('/data/table.csv', 'a').write('5,6')\nexcept OSError as exc:\n"
        "    print('read-only')"
    )
    assert asked == [conversation.pk]
    assert observation == ("Output:\n['notes.txt', 'table.csv']\n6 from a path\nread-only")
    assert notes.read_text() == "from a path"


def test_the_chats_attachments_are_the_files_in_data_each_name_once(python_tool, user):
    """Two files attached under one name are both there, the later one renamed."""
    conversation = Conversation.objects.create(owner=user)
    for text in ("first", "second"):
        Attachment.objects.create(
            conversation=conversation,
            owner=user,
            name="notes.txt",
            kind=Attachment.Kind.TEXT,
            size=len(text),
            file=ContentFile(text.encode(), name="notes"),
        )
    observation = python_tool(conversation=conversation).run(
        "import os\n"
        "for name in sorted(os.listdir('/data')):\n"
        "    print(name, open('/data/' + name).read())"
    )
    assert observation == "Output:\nnotes (2).txt second\nnotes.txt first"


def test_deleting_the_conversation_deletes_its_stored_files(
    python_tool, user, django_capture_on_commit_callbacks
):
    from django.core.files.storage import storages

    from agents.services.conversations import conversation_delete

    conversation = Conversation.objects.create(owner=user)
    python_tool(conversation=conversation).run("open('kept.txt', 'w').write('x')")
    stored = SandboxFile.objects.get(conversation=conversation)
    storage = storages["sandbox_files"]
    assert storage.exists(stored.file.name)

    with django_capture_on_commit_callbacks(execute=True):
        conversation_delete(conversation=conversation)
    assert not SandboxFile.objects.filter(pk=stored.pk).exists()
    assert not storage.exists(stored.file.name)


def test_files_with_names_that_are_not_plain_are_named_but_not_kept(python_tool, user):
    conversation = Conversation.objects.create(owner=user)
    observation = python_tool(conversation=conversation).run(
        "open('.hidden', 'w').write('x')\n"
        "open('two\\nlines.png', 'w').write('x')\n"
        "open('n' * 220, 'w').write('x')\n"
        "open('plain.txt', 'w').write('x')"
    )
    assert list(_urls(observation)) == ["plain.txt"]
    assert "Files not kept: " in observation
    assert "'two\\nlines.png'" in observation
    assert list(SandboxFile.objects.values_list("name", flat=True)) == ["plain.txt"]
