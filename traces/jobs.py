"""The trace ingest job's page section: the files it read and the sessions they hold."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from governance.jobs import JobSection
from traces import selectors
from traces.services import JOB_KIND

FILES_SHOWN = 50


def job_sections(job) -> list[JobSection]:
    if job.kind != JOB_KIND:
        return []
    files = selectors.job_files(job_id=job.pk)
    file_count = files.count()
    session_count = selectors.sessions_of_job(job_id=job.pk).count()
    query = urlencode({"job": job.pk, "sort": "-ingested"})
    sessions_url = f"{reverse('traces:session_list', args=[job.workspace.slug])}?{query}"
    links = []
    if session_count:
        links.append(
            (f"{session_count:,} session{'s' if session_count != 1 else ''} from this upload",
             sessions_url)
        )  # fmt: skip
    return [
        JobSection(
            title="What it loaded",
            template="traces/_job_files.html",
            links=links,
            data={
                "files": list(files[:FILES_SHOWN]),
                "file_count": file_count,
                "session_count": session_count,
                "sessions_url": sessions_url,
            },
        )
    ]
