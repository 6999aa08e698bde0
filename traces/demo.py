"""Demo traces: synthetic sessions with known parameters, plus the real samples when present."""

from pathlib import Path

from django.conf import settings

from governance.services import workspace_bump_data_version
from traces.analytics.services import analytics_refresh_queue
from traces.ingest import IngestSummary
from traces.models import UploadSource
from traces.services import ingest_bytes, ingest_upload, raw_upload_store, sessions_derive
from traces.synthetic import CorpusParams, generate_corpus

SHARED_FIXTURES = Path(settings.BASE_DIR).parent / "shared" / "fixtures"
DEMO_PARAMS = CorpusParams(sessions=18, steps_per_session=(80, 330), seed=2026)


def seed(*, workspace, users, stdout) -> None:
    calls = 0
    for generated in generate_corpus(DEMO_PARAMS):
        summary = ingest_bytes(
            workspace=workspace,
            name=f"{generated.session_id}.jsonl",
            data=b"\n".join(generated.lines) + b"\n",
            source=UploadSource.DEMO,
            user=users.get("editor"),
            refresh_analytics=False,
        )
        calls += summary.calls
    stdout.write(f"  synthetic traces: {DEMO_PARAMS.sessions} sessions, {calls} new calls")
    if SHARED_FIXTURES.is_dir():
        summary = IngestSummary()
        touched: set[int] = set()
        for path in sorted(SHARED_FIXTURES.glob("*.json*")):
            upload, _ = raw_upload_store(
                workspace=workspace,
                name=path.name,
                chunks=[path.read_bytes()],
                source=UploadSource.DEMO,
            )
            touched |= ingest_upload(workspace=workspace, upload=upload, summary=summary)
        sessions_derive(session_ids=touched)
        stdout.write(f"  real sample transcripts from {SHARED_FIXTURES}: {summary.calls} new calls")
    workspace_bump_data_version(workspace=workspace)
    analytics_refresh_queue(workspace=workspace)
    stdout.write("  trace analytics computed")
