"""Pages under /w/<workspace>/qualification/."""

app_name = "qualification"

urlpatterns: list = []
