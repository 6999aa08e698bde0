"""Pages under /w/<workspace>/context-files/."""

app_name = "contextfiles"

urlpatterns: list = []
