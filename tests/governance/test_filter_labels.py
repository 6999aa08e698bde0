"""Every filter dropdown names its empty choice ("Any status"), never Django's "---------"."""

from importlib import import_module

import django_filters
import pytest
from django.apps import apps


def _filtersets():
    for config in apps.get_app_configs():
        for module_name in ("filters", "annotations.filters", "analytics.filters"):
            try:
                import_module(f"{config.name}.{module_name}")
            except ModuleNotFoundError:
                continue
    names = {config.name for config in apps.get_app_configs()}
    import_module("governance.api.views")
    seen, stack = set(), list(django_filters.FilterSet.__subclasses__())
    while stack:
        cls = stack.pop()
        module = import_module(cls.__module__)
        if getattr(module, cls.__name__, None) is cls and cls.__module__.split(".")[0] in names:
            seen.add(cls)  # defined by name in an app's module (not DRF's generated AutoFilterSet)
        stack.extend(cls.__subclasses__())
    return sorted(seen, key=lambda cls: f"{cls.__module__}.{cls.__name__}")


@pytest.mark.django_db
def test_no_filter_dropdown_shows_dashes():
    filtersets = _filtersets()
    assert len(filtersets) >= 8
    offenders = []
    for filterset_class in filtersets:
        model = filterset_class._meta.model
        if model is None:  # an abstract base: its subclasses are checked
            continue
        form = filterset_class(data={}, queryset=model.objects.none()).form
        for name, field in form.fields.items():
            labels = [str(label) for _value, label in getattr(field, "choices", [])]
            if any(label.strip("-") == "" and label for label in labels):
                offenders.append(f"{filterset_class.__name__}.{name}")
    assert offenders == [], "; ".join(offenders)
