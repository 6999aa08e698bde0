"""Serve plotly.js from the plotly package's own copy, so no CDN and no vendored duplicate."""

import os

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_STATIC_PATH = "vendor/plotly.min.js"


class PlotlyJsFinder(BaseFinder):
    """Expose exactly one file, `vendor/plotly.min.js`, from plotly/package_data."""

    def __init__(self, *args, **kwargs):
        self.source_dir = os.path.join(os.path.dirname(plotly.__file__), "package_data")
        self.storage = FileSystemStorage(location=self.source_dir)
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != PLOTLY_STATIC_PATH:
            return [] if find_all else None
        match = os.path.join(self.source_dir, "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns):
        yield "plotly.min.js", self.storage
