"""Pages under /w/<workspace>/analytics/."""

app_name = "analytics"

urlpatterns: list = []
