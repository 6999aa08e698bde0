"""The planted spec and compaction summary of issue 19: the summary keeps three settled items
and drops two, one of them only by its number (115000 became "about 115k")."""

from specs.analysis.content import Alternative, Item

PROJECT = "/work/project"
PLANTED_ITEMS = [
    Item("limit.operating", "constraint",
         "The approved operating limit is 115,000 tokens; never compact above it."),
    Item("upload.retries", "requirement",
         "Retry failed uploads at most `MAX_RETRIES` = 3 times, with exponential backoff."),
    Item("storage.raw", "decision",
         "Raw uploads are stored under var/uploads/raw before they are parsed."),
    Item("auth.tokens", "requirement", "API tokens are hashed with sha256 and shown only once."),
    Item("ui.theme", "decision", "The dashboard offers a dark colour scheme chosen by each operator."),
    Item("queue.backend", "open_question", "Which broker carries the ingest queue?",
         status="unresolved",
         alternatives=(Alternative("Redis", "Already deployed."), Alternative("RabbitMQ", "Ops know it."))),
]  # fmt: skip
PLANTED_SUMMARY = """\
Summary of the work so far. We keep the operating limit at about 115k tokens and never compact
above it. Uploads: retry failed uploads with exponential backoff, MAX_RETRIES = 3. Raw uploads
are stored under var/uploads/raw before they are parsed. Tokens for the API are hashed (sha256)
and shown once. Next: finish the importer and rerun the tests."""
KEPT = {"upload.retries", "storage.raw", "auth.tokens"}
LOST = {"limit.operating", "ui.theme"}
