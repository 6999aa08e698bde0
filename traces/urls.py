"""Pages under /w/<workspace>/traces/."""

app_name = "traces"

urlpatterns: list = []
