"""Analytics stored for a model filter were computed when the filter matched any model
containing the text ("claude-sonnet-4" also took "claude-sonnet-4-5"). The filter now takes
one whole model name, under the same cache key: forget those results, so that they are
computed again (on the next read) with the exact match rather than shown with the old one."""

from django.db import migrations


def forget(apps, schema_editor):
    result = apps.get_model("analytics", "AnalyticsResult")
    result.objects.exclude(filters__model="").exclude(filters__model__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("analytics", "0004_instruction_visibility_runs")]

    operations = [migrations.RunPython(forget, migrations.RunPython.noop)]
