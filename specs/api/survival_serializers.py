"""Serializers of the survival audit: each settled item's verdict in a compaction summary."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from specs.api.serializers import _username
from specs.models import (
    SurvivalVerdict,
)


class SurvivalVerdictSerializer(serializers.ModelSerializer):
    """One settled item's verdict in one compaction's audit; `verdict` is the one that counts."""

    compaction = serializers.IntegerField(source="audit.compaction_id", read_only=True)
    session = serializers.IntegerField(source="audit.compaction.session_id", read_only=True)
    trigger = serializers.CharField(source="audit.compaction.trigger", read_only=True)
    spec = serializers.CharField(source="audit.spec_version.spec.slug", read_only=True)
    spec_version = serializers.IntegerField(source="audit.spec_version.number", read_only=True)
    method = serializers.CharField(source="audit.method", read_only=True)
    threshold = serializers.FloatField(source="audit.threshold", read_only=True)
    ran_at = serializers.DateTimeField(source="audit.ran_at", read_only=True)
    verdict = serializers.SerializerMethodField()
    computed = serializers.SerializerMethodField()
    correction = serializers.SerializerMethodField()

    class Meta:
        model = SurvivalVerdict
        fields = [
            "id", "compaction", "session", "trigger", "spec", "spec_version", "key", "verdict",
            "computed", "score", "reason", "missing", "correction", "method", "threshold",
            "ran_at",
        ]  # fmt: skip

    def get_verdict(self, row) -> str:
        return "kept" if row.final_kept else "lost"

    def get_computed(self, row) -> str:
        return "kept" if row.kept else "lost"

    @extend_schema_field(
        inline_serializer(
            "SurvivalCorrection",
            {
                "verdict": serializers.CharField(),
                "by": serializers.CharField(allow_null=True),
                "at": serializers.DateTimeField(),
                "note": serializers.CharField(),
            },
            allow_null=True,
        )
    )
    def get_correction(self, row) -> dict | None:
        if not row.is_corrected:
            return None
        return {
            "verdict": "kept" if row.corrected_kept else "lost",
            "by": _username(row.corrected_by),
            "at": row.corrected_at,
            "note": row.correction_note,
        }


class SurvivalCorrectSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(
        choices=["kept", "lost", "computed"],
        help_text="kept or lost: your verdict, kept across re-runs; computed: withdraw it.",
    )
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class SurvivalRunSerializer(serializers.Serializer):
    session = serializers.IntegerField(
        required=False,
        help_text="Only this session's compactions; all of the workspace's if left out.",
    )


class SurvivalRunResultSerializer(serializers.Serializer):
    compactions = serializers.IntegerField(help_text="Compactions with a summary.")
    audited = serializers.IntegerField(help_text="Audited against a governing spec.")
    skipped = serializers.IntegerField(help_text="No spec governs their session's project.")
