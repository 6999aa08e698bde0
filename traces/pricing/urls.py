"""Pages under /w/<workspace>/prices/."""

from django.urls import path

from traces.pricing import views

app_name = "pricing"

urlpatterns = [
    path("", views.PriceTablePage.as_view(), name="price_table"),
    path("v<int:number>/", views.PriceTablePage.as_view(), name="version"),
    path("edit/", views.ModelPriceEditPage.as_view(), name="price_edit"),
    path("remove/", views.ModelPriceRemoveView.as_view(), name="price_remove"),
    path("subagents/", views.SubagentCostPage.as_view(), name="subagent_cost"),
    path("load-list-prices/", views.LoadListPricesView.as_view(), name="load_list_prices"),
]
