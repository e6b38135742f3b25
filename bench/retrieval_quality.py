"""Retrieval quality of the knowledge search: full-text alone, by meaning alone, and the two
fused (agents/embeddings.py), on a corpus written for this bench; and what embedding costs
at indexing time.

The corpus: 30 short English passages (a company handbook and a product's help pages), each
asked about twice: once in English in other words than the passage's (a paraphrase, as
people ask), once in Simplified Chinese. Each passage is its own knowledge document, so a
question's answer is exactly one document. Recall@5 is the share of questions whose
passage is among the first five hits.

Indexing cost: ``PAGES`` pages of about 3,000 characters (the passages joined) ingested
with embeddings off and on; the difference per page is what embedding costs.

Rows are made in a collection of their own in your database (``DATABASE_URL``, default
chatsite_ops) and deleted at the end. Uses whichever embedder the settings choose
(``CHAT_EMBEDDINGS``; the built-in model unless a model config is marked for embeddings).

    .venv/bin/python bench/retrieval_quality.py
"""

from __future__ import annotations

import time
import uuid

import live  # noqa: F401 (sets up Django)
from django.test import override_settings

from agents import embeddings
from agents.models import KnowledgeChunk, KnowledgeDocument
from agents.services.knowledge import knowledge_document_ingest, knowledge_search

TOP = 5
PAGE_CHARS = 3000
PAGES = 10

# (passage, an English question in other words, a Chinese question)
CORPUS = [
    (
        "Employees may work from home up to two days each week, with their manager's approval.",
        "Can staff telecommute, and how often?",
        "员工每周可以远程办公几天？",
    ),
    (
        "Expense reports must be submitted within thirty days of the purchase, with receipts.",
        "What is the deadline for claiming money back for things I bought for the job?",
        "报销需要在购买后多少天内提交？",
    ),
    (
        "A lost badge should be reported to the security desk at once; a new one costs ten euros.",
        "I misplaced my access card. What should I do?",
        "门禁卡丢了怎么办？",
    ),
    (
        "The cafeteria serves vegetarian meals on Wednesdays and fish on Fridays.",
        "On which day is meatless food available at lunch?",
        "食堂哪天供应素食？",
    ),
    (
        "New hires receive a laptop on their first morning from the IT service desk.",
        "When do newcomers get their computer?",
        "新员工什么时候领取电脑？",
    ),
    (
        "Annual leave is twenty-five days a year; unused days expire at the end of March.",
        "How much vacation do I get and when does leftover time disappear?",
        "每年有多少天年假？未休的假期什么时候作废？",
    ),
    (
        "Parking spaces in the garage are assigned by lottery every January.",
        "How are spots for cars allocated?",
        "停车位是怎么分配的？",
    ),
    (
        "Passwords must be at least fourteen characters long and are never sent by email.",
        "What length should my login secret be?",
        "密码至少要多少位？",
    ),
    (
        "The office is closed on public holidays; the building opens at seven on weekdays.",
        "What time can I get into the premises in the morning?",
        "办公楼工作日几点开门？",
    ),
    (
        "Trips are booked through the company agency; economy class for flights under six hours.",
        "Who arranges business trips, and can I fly business class on short routes?",
        "出差机票应该通过谁预订？",
    ),
    (
        "Sick leave needs a doctor's certificate from the third day of absence.",
        "When do I need a medical note if I am ill?",
        "病假从第几天起需要医生证明？",
    ),
    (
        "Parents get sixteen weeks of paid leave after the birth or adoption of a child.",
        "How long is the paid break for new mothers and fathers?",
        "生育或收养孩子后有多少周带薪假？",
    ),
    (
        "The gym on the fourth floor is free for staff and open until nine in the evening.",
        "Is there somewhere to exercise at work, and how late is it open?",
        "公司健身房开放到几点？",
    ),
    (
        "Salaries are paid on the twenty-fifth of each month, or the working day before.",
        "On what date does my pay arrive?",
        "工资每月几号发放？",
    ),
    (
        "Visitors sign in at reception and must be accompanied by their host at all times.",
        "What are the rules for guests coming to the building?",
        "访客来访需要登记吗？",
    ),
    (
        "Refunds are paid back to the original card within ten working days of the return.",
        "How long until I get my money back after sending an item back?",
        "退货后多久能收到退款？",
    ),
    (
        "Standard delivery takes three to five working days; express arrives the next day.",
        "How quickly will my parcel reach me?",
        "快递需要几天送达？",
    ),
    (
        "Every kettle carries a two-year warranty that covers the heating element.",
        "For how long is the water boiler guaranteed?",
        "电水壶的保修期是多久？",
    ),
    (
        "To reset the router, hold the button on the back for ten seconds until the light blinks.",
        "How do I restore the wireless box to factory settings?",
        "路由器怎么恢复出厂设置？",
    ),
    (
        "Orders above fifty euros ship at no cost within the country.",
        "When is shipping free?",
        "订单满多少钱包邮？",
    ),
    (
        "Gift cards are valid for three years and cannot be exchanged for cash.",
        "Do vouchers expire, and can I turn them into money?",
        "礼品卡的有效期是多久？能兑换现金吗？",
    ),
    (
        "The mobile app works offline; changes synchronise when the phone reconnects.",
        "Can I use the phone application without an internet connection?",
        "手机应用可以离线使用吗？",
    ),
    (
        "Two-factor authentication is turned on in Settings, Security, with an authenticator app.",
        "How do I add a second step when signing in?",
        "如何开启双重验证？",
    ),
    (
        "Invoices can be downloaded as PDF from the Billing page for the last seven years.",
        "Where do I get copies of my bills?",
        "在哪里下载发票？",
    ),
    (
        "Accounts that are inactive for two years are deleted after a warning email.",
        "What happens to a profile nobody has used in a long time?",
        "长期不用的账户会被删除吗？",
    ),
    (
        "The battery lasts about eight hours of video playback and charges fully in two hours.",
        "How long can I watch films before the device needs power?",
        "电池能用多久？充满电要多长时间？",
    ),
    (
        "Damaged parcels should be photographed and reported to support within forty-eight hours.",
        "My package arrived broken; what now?",
        "包裹到货时损坏了怎么办？",
    ),
    (
        "Subscriptions renew automatically each month unless cancelled before the renewal date.",
        "How do I stop being charged every month?",
        "订阅会自动续费吗？怎么取消？",
    ),
    (
        "Customer support answers by phone from nine to five, Monday to Friday.",
        "When can I call the help line?",
        "客服电话的服务时间是什么时候？",
    ),
    (
        "The blender's jug is dishwasher safe, but the motor base must only be wiped with a cloth.",
        "Can I put the mixer parts in the machine that washes plates?",
        "搅拌机的杯子可以放进洗碗机吗？",
    ),
]


def recall(collection: str, targets: dict[str, int], questions: list[tuple[str, str]]) -> float:
    found = 0
    for passage, question in questions:
        hits = knowledge_search(collection=collection, query=question, limit=TOP)
        found += targets[passage] in {hit.document_id for hit in hits}
    return found / len(questions)


def meaning_recall(
    collection: str, targets: dict[str, int], questions: list[tuple[str, str]]
) -> float:
    chunks = KnowledgeChunk.objects.filter(document__collection=collection)
    document_of = dict(chunks.values_list("id", "document_id"))
    found = 0
    for passage, question in questions:
        nearest = embeddings.meaning_ranking(chunks, question, TOP)
        found += targets[passage] in {document_of[chunk_id] for chunk_id, _ in nearest}
    return found / len(questions)


def indexing_cost(collection: str) -> tuple[float, float, int]:
    """Seconds per page with embeddings off and on, and the chunks per page."""
    text = "\n\n".join(passage for passage, _, _ in CORPUS)
    text *= PAGE_CHARS * PAGES // len(text) + 1
    pages = [text[start : start + PAGE_CHARS] for start in range(0, PAGE_CHARS * PAGES, PAGE_CHARS)]
    seconds = {}
    for choice in ("off", embeddings_choice()):
        with override_settings(CHAT_EMBEDDINGS=choice):
            embeddings.embedder()  # loaded before the clock starts
            started = time.perf_counter()
            for number, page in enumerate(pages):
                document = KnowledgeDocument.objects.create(
                    title=f"page {number}", collection=f"{collection}-pages", text=page
                )
                knowledge_document_ingest(document=document)
            seconds[choice] = (time.perf_counter() - started) / len(pages)
    chunks = KnowledgeChunk.objects.filter(document__collection=f"{collection}-pages").count()
    return seconds["off"], seconds[embeddings_choice()], chunks // (2 * len(pages))


def embeddings_choice() -> str:
    from django.conf import settings

    return "auto" if settings.CHAT_EMBEDDINGS == "off" else settings.CHAT_EMBEDDINGS


def main() -> None:
    status = embeddings.embeddings_status()
    if not status.on:
        raise SystemExit(f"embeddings are off ({status.source}): nothing to compare")
    collection = f"bench-retrieval-{uuid.uuid4().hex[:8]}"
    try:
        targets = {}
        for number, (passage, _, _) in enumerate(CORPUS, start=1):
            document = KnowledgeDocument.objects.create(
                title=f"Passage {number}", collection=collection, text=passage
            )
            knowledge_document_ingest(document=document)
            targets[passage] = document.pk
        english = [(passage, question) for passage, question, _ in CORPUS]
        chinese = [(passage, question) for passage, _, question in CORPUS]
        print(f"embedder: {status.model}; {len(CORPUS)} passages; recall@{TOP}")
        print(f"{'':24}{'English paraphrase':>20}{'Chinese question':>20}")
        with override_settings(CHAT_EMBEDDINGS="off"):
            rows = [
                (
                    "full-text alone",
                    recall(collection, targets, english),
                    recall(collection, targets, chinese),
                )
            ]
        rows.append(
            (
                "by meaning alone",
                meaning_recall(collection, targets, english),
                meaning_recall(collection, targets, chinese),
            )
        )
        rows.append(
            (
                "hybrid (RRF)",
                recall(collection, targets, english),
                recall(collection, targets, chinese),
            )
        )
        for name, english_recall, chinese_recall in rows:
            print(f"{name:24}{english_recall:>20.0%}{chinese_recall:>20.0%}")
        off, on, chunks = indexing_cost(collection)
        print(
            f"indexing a page of {PAGE_CHARS} characters ({chunks} chunks): "
            f"{off * 1000:.0f} ms full-text only, {on * 1000:.0f} ms with embeddings "
            f"(+{(on - off) * 1000:.0f} ms)"
        )
        started = time.perf_counter()
        for _, question, _ in CORPUS:
            knowledge_search(collection=collection, query=question, limit=TOP)
        per_query = (time.perf_counter() - started) / len(CORPUS)
        print(f"a hybrid search over {len(CORPUS)} passages: {per_query * 1000:.0f} ms")
    finally:
        KnowledgeDocument.objects.filter(collection__startswith=collection).delete()


if __name__ == "__main__":
    main()
