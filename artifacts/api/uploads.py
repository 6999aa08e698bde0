"""Request bodies for artifact writes: a raw body is streamed by the view, never parsed; a
multipart file part is streamed into the artifact writer while Django parses the form.
"""

from __future__ import annotations

from urllib.parse import unquote

from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from rest_framework.parsers import BaseParser

from artifacts.services import ArtifactTooLarge, ArtifactWriter

UPLOAD_CHUNK = 1024 * 1024
FILE_FIELD = "file"


class RawBodyParser(BaseParser):
    """Claims any non-multipart body without reading it: the view streams it in chunks."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


class StreamedFile:
    """What a streamed upload leaves in request.FILES: its size; the bytes went to the writer."""

    def __init__(self, size: int):
        self.size = size
        self.name = FILE_FIELD


class ArtifactUploadHandler(FileUploadHandler):
    """Feeds the `file` part straight into an ArtifactWriter: redacted before it touches disk."""

    chunk_size = UPLOAD_CHUNK

    def __init__(self, request, open_writer):
        super().__init__(request)
        self.open_writer = open_writer
        self.writer: ArtifactWriter | None = None
        self.error: Exception | None = None
        self.completed = False
        self.interrupted = False
        self._skip = False

    def new_file(self, field_name, *args, **kwargs):
        super().new_file(field_name, *args, **kwargs)
        self._skip = True
        if self.error is not None:
            return
        if field_name != FILE_FIELD or self.writer is not None:
            self.error = ValueError(
                f"file: send exactly one file part, named {FILE_FIELD!r} (got {field_name!r})"
            )
            raise StopUpload(connection_reset=False)
        try:
            self.writer = self.open_writer()
        except Exception as exc:
            self.error = exc
            raise StopUpload(connection_reset=False) from None
        self._skip = False

    def receive_data_chunk(self, raw_data, start):
        if self._skip:
            return None
        try:
            self.writer.write(raw_data)
        except ArtifactTooLarge as exc:
            self.error = exc
            raise StopUpload(connection_reset=True) from None
        except Exception as exc:
            self.error = exc
            raise StopUpload(connection_reset=False) from None
        return None

    def file_complete(self, file_size):
        if self._skip:
            return None
        self.completed = True
        return StreamedFile(file_size)

    def upload_interrupted(self):
        self.interrupted = True

    def discard(self) -> None:
        if self.writer is not None:
            self.writer.discard()


def header_text(value: str | None) -> str | None:
    """A header value as text: `utf-8''<percent-encoded>` (RFC 8187) or raw UTF-8 bytes."""
    if value is None:
        return None
    if value[:7].lower() == "utf-8''":
        return unquote(value[7:], encoding="utf-8", errors="strict")
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value
