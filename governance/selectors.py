"""Reads for the core: memberships, invitations, workspaces a user can see, jobs and the audit log."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Exists, OuterRef, QuerySet
from django.http import Http404
from django.utils import timezone

from governance.models import (
    ApiToken,
    AuditEvent,
    Invitation,
    InvitationStatus,
    Job,
    Membership,
    Role,
    Workspace,
)


def memberships_for_user(*, user) -> QuerySet[Membership]:
    if not getattr(user, "is_authenticated", False):
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("workspace")


def membership_get(*, user, workspace_slug: str) -> Membership:
    """The user's membership in a workspace; 404 if the workspace is unknown or not theirs."""
    membership = memberships_for_user(user=user).filter(workspace__slug=workspace_slug).first()
    if membership is None:
        raise Http404("No such workspace, or you are not a member of it.")
    return membership


def workspace_members(*, workspace: Workspace) -> QuerySet[Membership]:
    return Membership.objects.filter(workspace=workspace).select_related("user")


def api_tokens_for(*, workspace: Workspace, user=None) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.filter(workspace=workspace).select_related("user")
    return tokens.filter(user=user) if user is not None else tokens


def jobs_for(*, workspace: Workspace, kind: str | None = None) -> QuerySet[Job]:
    jobs = Job.objects.filter(workspace=workspace).select_related("created_by")
    return jobs.filter(kind=kind) if kind else jobs


# Kinds whose jobs are re-run for the same target (a refresh): a run of them shows as one row.
REPEATING_JOB_KINDS = {"trace_analytics", "qualification_analysis"}


@dataclass
class JobRow:
    """A job on the jobs list, standing for `count` consecutive runs of the same refresh."""

    job: Job
    count: int = 1


def jobs_collapsed(jobs) -> list[JobRow]:
    """Consecutive jobs of a repeating kind with the same target (its label) as one row,
    led by the first of them (the latest, in the list's newest-first order)."""
    rows: list[JobRow] = []
    for job in jobs:
        last = rows[-1].job if rows else None
        if (
            last is not None
            and job.kind in REPEATING_JOB_KINDS
            and (job.kind, job.label) == (last.kind, last.label)
        ):
            rows[-1].count += 1
        else:
            rows.append(JobRow(job))
    return rows


def job_get(*, workspace: Workspace, pk: int) -> Job:
    job = jobs_for(workspace=workspace).filter(pk=pk).first()
    if job is None:
        raise Http404("No such job in this workspace.")
    return job


def audit_events_for(*, workspace: Workspace) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(workspace=workspace).select_related("actor")


def invitee_names(*, user) -> list[str]:
    """What an invitation may name to reach this user: the username, the e-mail address."""
    names = [user.get_username()]
    if "@" in names[0]:
        names.append(names[0].lower())
    if getattr(user, "email", ""):
        names.append(user.email.lower())
    return names


def invitations_for_user(*, user) -> QuerySet[Invitation]:
    """Every invitation addressed to the user, whatever its state."""
    if not getattr(user, "is_authenticated", False):
        return Invitation.objects.none()
    return Invitation.objects.filter(invitee__in=invitee_names(user=user)).select_related(
        "workspace", "invited_by"
    )


def invitations_pending_for_user(*, user) -> QuerySet[Invitation]:
    return invitations_for_user(user=user).filter(
        status=InvitationStatus.PENDING, expires_at__gt=timezone.now()
    )


def invitation_for_user(*, user, pk) -> Invitation:
    """One of the user's invitations; 404 for anyone else's."""
    invitation = invitations_for_user(user=user).filter(pk=pk).first()
    if invitation is None:
        raise Http404("No such invitation for you.")
    return invitation


def invitations_open_for_workspace(*, workspace: Workspace) -> QuerySet[Invitation]:
    """Invitations not yet answered or revoked (expired ones included, marked as such)."""
    return Invitation.objects.filter(
        workspace=workspace, status=InvitationStatus.PENDING
    ).select_related("invited_by")


# --- what waits for a member --------------------------------------------------


@dataclass(frozen=True)
class QueueWork:
    queue: object  # AnnotationQueue
    left: int  # runs the member can still take
    open_run: object | None = None  # the QueueSlot the member holds, if any


@dataclass(frozen=True)
class Waiting:
    """What waits for one member of a workspace, from each app's own selectors."""

    limits: list = field(default_factory=list)  # OperatingLimit proposals to review
    spec_versions: list = field(default_factory=list)  # SpecVersion in review
    queues: list[QueueWork] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.limits) + len(self.spec_versions) + len(self.queues)


def waiting_for(*, membership: Membership) -> Waiting:
    """Operating limits and spec versions the member may review (not their own), and annotation
    queues with runs left for them. Scoped to the membership's workspace."""
    # The apps depend on the core, not the other way round: import them when asked.
    from qualification.selectors import limits_awaiting_review
    from specs.selectors import review_queue
    from traces.annotations.selectors import can_annotate, open_assignments

    workspace, user = membership.workspace, membership.user
    spec_versions = []
    if membership.has_role(Role.REVIEWER):
        spec_versions = list(review_queue(workspace=workspace).exclude(author=user))
    queues = []
    if can_annotate(membership=membership):
        queues = _queue_work(
            workspace=workspace,
            user=user,
            open_slots=open_assignments(workspace=workspace, user=user).select_related(
                "item__queue"
            ),
        )
    return Waiting(
        limits=limits_awaiting_review(membership=membership),
        spec_versions=spec_versions,
        queues=queues,
    )


def _queue_work(*, workspace: Workspace, user, open_slots) -> list[QueueWork]:
    """Open queues the user annotates, with the runs still free for them (not taken by them,
    not skipped, a place unclaimed) and the run they hold."""
    from traces.annotations.models import (
        AnnotationQueue,
        QueueItem,
        QueueSkip,
        QueueSlot,
        QueueStatus,
    )

    held = {slot.item.queue_id: slot for slot in open_slots}
    item = OuterRef("pk")
    free = (
        QueueItem.objects.filter(
            queue__workspace=workspace, queue__status=QueueStatus.OPEN, queue__members__user=user
        )
        .filter(Exists(QueueSlot.objects.filter(item=item, annotator__isnull=True)))
        .exclude(Exists(QueueSlot.objects.filter(item=item, annotator=user)))
        .exclude(Exists(QueueSkip.objects.filter(item=item, user=user)))
        .values("queue_id")
        .annotate(n=Count("id"))
    )
    left = {row["queue_id"]: row["n"] for row in free}
    queues = AnnotationQueue.objects.filter(
        workspace=workspace, status=QueueStatus.OPEN, pk__in=set(left) | set(held)
    ).order_by("created_at", "pk")
    return [QueueWork(queue=q, left=left.get(q.pk, 0), open_run=held.get(q.pk)) for q in queues]
