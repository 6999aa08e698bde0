"""Annotations API: divergence marks, final marks, agreement, queues and aggregates."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.viewsets import WorkspaceScopedMixin
from traces.annotations import selectors, services
from traces.annotations.analysis import aggregates
from traces.annotations.analysis.classes import FAILURE_CLASSES
from traces.annotations.api import serializers
from traces.annotations.filters import DivergenceFilter, RunFilter, criteria_of
from traces.annotations.models import AnnotationQueue, Divergence
from traces.models import Agent, Run, Session

CURRENT = OpenApiParameter(
    "current", str, description="true (default): current marks only; false: with replaced ones."
)


def _int_param(request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: [f"'{raw}' is not a whole number."]}) from None
    if not low <= value <= high:
        raise ValidationError({name: [f"Must be between {low:,} and {high:,}."]})
    return value


def _basis(request) -> str:
    basis = request.query_params.get("basis", "resolved")
    if basis not in {"resolved", "marks"}:
        raise ValidationError({"basis": ["Use resolved (one per run) or marks (every mark)."]})
    return basis


@extend_schema(parameters=[CURRENT])
class DivergenceViewSet(
    WorkspaceScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """First-divergence marks. Anyone in the workspace reads them; editors and above mark;
    admins adjudicate."""

    queryset = Divergence.objects.select_related("annotator", "workspace").order_by(
        "session_id", "call_index", "id"
    )
    serializer_class = serializers.DivergenceSerializer
    filterset_class = DivergenceFilter
    write_role = services.ANNOTATE_ROLE
    action_roles = {"adjudicate": services.ADJUDICATE_ROLE}

    def get_queryset(self):
        marks = super().get_queryset()
        if self.action == "list":
            for name, model in (("session", "session"), ("run", "run")):
                value = self.request.query_params.get(name)
                if value and value.isdigit():
                    found = (Session if model == "session" else Run).objects.filter(
                        workspace=self.request.workspace, pk=int(value)
                    )
                    if not found.exists():
                        raise Http404(f"No such {model} in this workspace.")
            if self.request.query_params.get("current", "true").lower() not in {"false", "all"}:
                marks = marks.filter(replaced_at__isnull=True)
        return marks

    @extend_schema(
        request=serializers.DivergenceInputSerializer,
        responses={
            201: serializers.DivergenceSerializer,
            200: OpenApiResponse(
                serializers.DivergenceSerializer, description="The same mark again: unchanged."
            ),
        },
        summary="Mark (or replace) your first divergence on a run",
        description=(
            "The run is the one that contains the call at `call_index` (0-based in the session). "
            "A second mark by the same annotator on the same run replaces the first; the first "
            "stays in history (`replaces`, `current=false`). The call's context size and model "
            "are stored. 400 names the field: a call outside the session/agent/run, an unknown "
            "class, evidence at or after the divergence or outside the session, 'other' "
            "with neither `other_text` nor `note` (without `other_text`, the note is the "
            "'other' text)."
        ),
    )
    def create(self, request):
        payload = serializers.DivergenceInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        session = selectors.session_get(workspace=request.workspace, pk=data["session"])
        agent = run = None
        if data.get("agent") is not None:
            agent = Agent.objects.filter(session=session, pk=data["agent"]).first()
            if agent is None:
                raise ValidationError({"agent": [f"Agent {data['agent']} is not in this session."]})
        if data.get("run") is not None:
            run = Run.objects.filter(session=session, pk=data["run"]).first()
            if run is None:
                raise ValidationError({"run": [f"Run {data['run']} is not in this session."]})
        mark = services.divergence_mark(
            session=session,
            annotator=request.user,
            agent=agent,
            run=run,
            call_index=data["call_index"],
            failure_class=data["failure_class"],
            other_text=data.get("other_text", ""),
            note=data.get("note", ""),
            evidence_call_indexes=data.get("evidence_call_indexes", []),
            confidence=data["confidence"],
        )
        return Response(
            serializers.DivergenceSerializer(mark).data,
            status=status.HTTP_200_OK if mark.unchanged else status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=serializers.AdjudicationInputSerializer,
        responses={201: serializers.DivergenceSerializer},
        summary="Settle a run with a final mark (admin)",
        description="Adopt an annotator's current mark (`adopt`) or give the final step and "
        "class yourself. A new final mark replaces the previous one, which stays in history.",
    )
    @action(detail=False, methods=["post"])
    def adjudicate(self, request):
        payload = serializers.AdjudicationInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        run = selectors.run_in_workspace(workspace=request.workspace, pk=data["run"])
        adopt = None
        if data.get("adopt") is not None:
            adopt = Divergence.objects.filter(
                workspace=request.workspace, pk=data["adopt"], run=run
            ).first()
            if adopt is None:
                raise ValidationError({"adopt": [f"Mark {data['adopt']} is not on run {run.pk}."]})
        final = services.divergence_adjudicate(
            run=run,
            adjudicator=request.user,
            adopt=adopt,
            call_index=data.get("call_index"),
            failure_class=data.get("failure_class", ""),
            confidence=data.get("confidence", ""),
            other_text=data.get("other_text", ""),
            note=data.get("note", ""),
            evidence_call_indexes=data.get("evidence_call_indexes", []),
        )
        return Response(
            serializers.DivergenceSerializer(final).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("run", int, required=True),
            OpenApiParameter("window", int, description="±N steps count as the same (default 3)."),
        ],
        responses=serializers.RunAgreementSerializer,
        summary="Agreement between the annotators of one run",
    )
    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None)
    def agreement(self, request):
        run_id = _int_param(request, "run", 0, 1, 2**62)
        run = selectors.run_in_workspace(workspace=request.workspace, pk=run_id)
        window = _int_param(request, "window", 3, 0, 1000)
        marks = selectors.run_marks(run=run, window=window)
        agreement = marks.agreement
        data = {
            "run": run.pk,
            "window": window,
            "marks": marks.marks,
            "final": marks.final,
            "n": len(marks.marks),
            "steps": sorted(m.call_index for m in marks.marks),
            "step_spread": agreement.step_spread if agreement else None,
            "same_step": agreement.same_step if agreement else None,
            "within_window": agreement.within_window if agreement else None,
            "class_counts": agreement.class_counts
            if agreement
            else {m.failure_class: 1 for m in marks.marks},
            "same_class": agreement.same_class if agreement else None,
            "majority_class": agreement.majority_class if agreement else None,
        }
        return Response(serializers.RunAgreementSerializer(data).data)


AGGREGATE_PARAMS = [
    OpenApiParameter("band_width", int, description="Tokens per band (1,000–1,000,000; 25,000)."),
    OpenApiParameter("basis", str, description="resolved (default, one per run) or marks."),
    OpenApiParameter("window", int, description="±N steps agree when resolving (default 3)."),
    OpenApiParameter("model", str, description="Model contains."),
    OpenApiParameter("project", str, description="Project contains."),
    OpenApiParameter("queue", int, description="Only runs of this annotation queue."),
    OpenApiParameter("annotator", str, description="Only this annotator's marks."),
]


def _filtered_marks(request):
    marks = selectors.divergences_for(workspace=request.workspace)
    filterset = DivergenceFilter(request.query_params, queryset=marks, request=request)
    if not filterset.is_valid():
        raise ValidationError(filterset.errors)
    return filterset.qs


class DivergenceByBandView(APIView):
    @extend_schema(
        parameters=AGGREGATE_PARAMS,
        responses=serializers.DivergenceByBandSerializer,
        summary="Failure classes by context band",
        description="Counts of first divergences by failure class and by the context size at "
        "the divergent call, in bands of `band_width` tokens. With `basis=resolved` each run "
        "counts once (its final mark, its only mark, or its annotators' unanimous mark within "
        "±window steps); disputed runs are left out and counted.",
    )
    def get(self, request):
        width = _int_param(request, "band_width", aggregates.DEFAULT_BAND, 1000, 1_000_000)
        window = _int_param(request, "window", 3, 0, 1000)
        report = selectors.band_report(
            marks=_filtered_marks(request), width=width, basis=_basis(request), window=window
        )
        totals = report.table.class_totals()
        data = {
            "band_width": width,
            "basis": report.basis,
            "window": window,
            "n": report.table.n,
            "runs": report.resolution.runs,
            "disputed_runs": len(report.resolution.disputed_runs),
            "resolution": report.resolution.how,
            "classes": [
                {"slug": slug, "label": label, "total": totals.get(slug, 0)}
                for slug, (label, _) in FAILURE_CLASSES.items()
            ],
            "bands": [
                {"lower": b.lower, "upper": b.upper, "label": b.label, "n": b.n, "counts": b.counts}
                for b in report.table.bands
            ],
        }
        return Response(serializers.DivergenceByBandSerializer(data).data)


class DivergenceVsLabView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("model", str, required=True, description="Exact model name."),
            *[p for p in AGGREGATE_PARAMS if p.name in {"basis", "window", "project", "queue"}],
        ],
        responses=serializers.LabComparisonSerializer,
        summary="Production against the lab for one model",
        description="The context at first divergence of annotated production runs of the model "
        "against the weakest family's ECL (else knee) of its latest analysed qualification. "
        "`verdict` is `earlier` when the upper end of the distribution-free 95% interval of the "
        "median is below the ECL; `no_qualification` when the model has none.",
    )
    def get(self, request):
        model = request.query_params.get("model", "").strip()
        if not model:
            raise ValidationError({"model": ["Name the model, e.g. ?model=claude-sonnet-4."]})
        window = _int_param(request, "window", 3, 0, 1000)
        marks = _filtered_marks(request)
        points, _ = selectors.resolved(marks=marks, window=window, basis=_basis(request))
        report = selectors.lab_report(workspace=request.workspace, points=points, model=model)
        dist = aggregates.distribution(report.contexts)
        if report.comparison is None:
            data = {
                "model": model,
                "qualification": None,
                "verdict": "no_qualification",
                "statement": f"No analysed qualification names the model '{model}'; qualify it "
                "to compare production with the lab.",
                "reference_kind": "",
                "reference_tokens": None,
                "family": None,
                "below_reference": 0,
                "distribution": dist.__dict__,
                "contexts": report.contexts,
            }
        else:
            ref, comparison = report.reference, report.comparison
            data = {
                "model": model,
                "qualification": {
                    "id": ref.qualification_id,
                    "name": ref.qualification_name,
                    "model_version": ref.model_version,
                    "workload": ref.workload,
                    "threshold": ref.threshold,
                    "weakest_family": report.family.family,
                    "ecl_tokens": report.family.ecl_tokens,
                    "knee_tokens": report.family.knee_tokens,
                    "proposed_limit_tokens": ref.proposed_limit_tokens,
                },
                "verdict": comparison.verdict,
                "statement": comparison.statement,
                "reference_kind": comparison.reference_kind,
                "reference_tokens": comparison.reference_tokens,
                "family": comparison.family,
                "below_reference": comparison.below_reference,
                "distribution": comparison.distribution.__dict__,
                "contexts": report.contexts,
            }
        return Response(serializers.LabComparisonSerializer(data).data)


class AnnotationQueueViewSet(
    WorkspaceScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Annotation queues: runs sampled from a filter, handed out to annotators one at a time."""

    queryset = AnnotationQueue.objects.select_related("created_by", "workspace")
    serializer_class = serializers.QueueSerializer
    filterset_fields = ["status"]
    action_roles = {
        "create": services.QUEUE_BUILD_ROLE,
        "next": services.ANNOTATE_ROLE,
        "finish": services.ANNOTATE_ROLE,
        "set_status": services.QUEUE_BUILD_ROLE,
    }

    @extend_schema(responses=serializers.QueueDetailSerializer)
    def retrieve(self, request, pk=None):
        queue = self.get_object()
        context = {
            "progress": selectors.queue_progress(queue=queue),
            "agreement": selectors.queue_agreement(queue=queue),
        }
        return Response(serializers.QueueDetailSerializer(queue, context=context).data)

    @extend_schema(
        request=serializers.QueueBuildSerializer,
        responses={201: serializers.QueueSerializer},
        summary="Build a queue from a run filter (reviewer or admin)",
        description="Samples `sample_size` runs (seeded; the seed is stored) from the runs "
        'matching `filter`, e.g. `{"min_context": 150000, "project": "checkout"}`. Each '
        "run gets `annotators_per_run` places.",
    )
    def create(self, request):
        payload = serializers.QueueBuildSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        runs = Run.objects.filter(workspace=request.workspace)
        filterset = RunFilter(data.get("filter") or {}, queryset=runs, request=request)
        if not filterset.is_valid():
            raise ValidationError({"filter": filterset.errors})
        users = {
            u.username: u for u in get_user_model().objects.filter(username__in=data["annotators"])
        }
        unknown = [name for name in data["annotators"] if name not in users]
        if unknown:
            raise ValidationError({"annotators": [f"No such user: {', '.join(unknown)}."]})
        queue = services.queue_build(
            workspace=request.workspace,
            actor=request.user,
            name=data["name"],
            runs=filterset.qs,
            criteria=criteria_of(filterset),
            sample_size=data["sample_size"],
            annotators=list(users.values()),
            annotators_per_run=data["annotators_per_run"],
            agreement_window=data["agreement_window"],
            seed=data.get("seed"),
        )
        return Response(serializers.QueueSerializer(queue).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={
            200: serializers.AssignmentSerializer,
            204: OpenApiResponse(description="Nothing left for you in this queue."),
        },
        summary="Your next run",
        description="Returns your open run in the queue; when you have none, claims the next "
        "free place (never one someone else holds, never a run you skipped or hold already). "
        "Repeating the call returns the same run until you mark it, say it has no divergence, "
        "or skip it. GET and POST behave the same.",
    )
    @action(detail=True, methods=["get", "post"])
    def next(self, request, pk=None):
        queue = self.get_object()
        slot = services.queue_next(queue=queue, user=request.user)
        if slot is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        run = slot.item.run
        viewer = reverse(
            "annotations:run_viewer", args=[request.workspace.slug, run.session_id, run.pk]
        )
        data = {
            "queue": queue.pk,
            "position": slot.item.position,
            "run": run,
            "assigned_at": slot.assigned_at,
            "viewer_url": f"{viewer}?queue={queue.pk}",
        }
        return Response(serializers.AssignmentSerializer(data).data)

    @extend_schema(
        request=serializers.QueueFinishSerializer,
        responses={200: serializers.QueueSerializer},
        summary="Finish your open run without a mark: no divergence, or skip it",
    )
    @action(detail=True, methods=["post"])
    def finish(self, request, pk=None):
        queue = self.get_object()
        payload = serializers.QueueFinishSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        if data["outcome"] == "skip":
            services.queue_skip(
                queue=queue,
                user=request.user,
                run_id=data.get("run"),
                reason=data.get("reason", ""),
            )
        else:
            services.queue_no_divergence(queue=queue, user=request.user, run_id=data.get("run"))
        return Response(serializers.QueueSerializer(queue).data)

    @extend_schema(
        request=serializers.QueueStatusSerializer,
        responses=serializers.QueueSerializer,
        summary="Close or reopen a queue (reviewer or admin)",
    )
    @action(detail=True, methods=["post"], url_path="status")
    def set_status(self, request, pk=None):
        queue = self.get_object()
        payload = serializers.QueueStatusSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        services.queue_set_status(
            queue=queue, actor=request.user, status=payload.validated_data["status"]
        )
        return Response(serializers.QueueSerializer(queue).data)
