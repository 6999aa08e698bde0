"""Pages under /w/<workspace>/artifacts/."""

app_name = "artifacts"

urlpatterns: list = []
