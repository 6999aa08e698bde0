"""Pages under /w/<workspace>/annotations/."""

app_name = "annotations"

urlpatterns: list = []
