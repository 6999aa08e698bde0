"""Pages under /w/<workspace>/specs/."""

app_name = "specs"

urlpatterns: list = []
