"""Pure readers and writers: spec Markdown import/export and restart-package rendering. No Django."""
