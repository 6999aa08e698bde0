from django.apps import AppConfig


class PricingConfig(AppConfig):
    name = "traces.pricing"
    label = "pricing"
    verbose_name = "Prices"
    default_auto_field = "django.db.models.BigAutoField"
