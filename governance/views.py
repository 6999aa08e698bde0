"""Shared base views (workspace scoping, roles, lists with filters) and the core pages."""

from __future__ import annotations

import django_filters
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import connection
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.functional import cached_property
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.generic import TemplateView
from django_htmx.http import HttpResponseStopPolling

from governance import forms, selectors, services
from governance.errors import Conflict, DomainError, InputError
from governance.filters import SORT_PARAM, AuditEventFilter, JobFilter
from governance.htmx import htmx_partial, render_region
from governance.jobs import sections_for
from governance.models import ApiToken, Membership, Role
from governance.selectors import membership_get, memberships_for_user

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class WorkspaceMixin:
    """Resolve `<workspace>` from the URL; 404 unless the user is a member; check roles.

    `read_role` guards safe methods and `write_role` guards the rest, on the server.
    """

    read_role: int = Role.VIEWER
    write_role: int = Role.EDITOR

    def dispatch(self, request, *args, **kwargs):
        membership = membership_get(user=request.user, workspace_slug=kwargs.pop("workspace"))
        request.workspace = membership.workspace
        request.membership = membership
        self.workspace = membership.workspace
        self.membership = membership
        needed = self.read_role if request.method in SAFE_METHODS else self.write_role
        if membership.role < needed:
            raise PermissionDenied(
                f"This needs the {Role(needed).label} role; you are {Role(membership.role).label}."
            )
        if request.session.get("workspace") != membership.workspace.slug:
            request.session["workspace"] = membership.workspace.slug
        try:
            return super().dispatch(request, *args, **kwargs)
        except DomainError as exc:
            return self.domain_error_response(request, exc, *args, **kwargs)

    def domain_error_response(self, request, exc: DomainError, *args, **kwargs):
        """The one page mapping of a domain error the view did not turn into form errors.

        After a write the page is shown again as a GET shows it, with the message as an error
        flash and the error's status (a GET that redirects stays a redirect: the flash shows on
        the next page). A read that fails shows the message on its own page. A view whose
        error is content (a tombstone) overrides this.
        """
        if request.method not in SAFE_METHODS and hasattr(self, "get"):
            messages.error(request, exc.message)
            response = self.get(request, *args, **kwargs)
            if not 300 <= response.status_code < 400:
                response.status_code = exc.status
            return response
        return render(request, "domain_error.html", {"error": exc}, status=exc.status)

    def wreverse(self, name: str, *args) -> str:
        return reverse(name, args=[self.workspace.slug, *args])


class WorkspaceTemplateView(WorkspaceMixin, TemplateView):
    pass


class WorkspaceObjectMixin:
    """One object of the workspace, fetched through a selector: another workspace's is 404.

    Set `selector` to a function `(*, workspace, **lookup) -> object` that raises `Http404` for
    a missing or foreign object (a selector of the app), and `lookup` to map its keyword
    arguments to URL kwargs (default `{"pk": "pk"}`). The object is `self.object`, fetched once.
    """

    selector = None
    lookup: dict[str, str] = {"pk": "pk"}
    context_object_name = "object"

    def get_object(self):
        fetch = type(self).selector  # a plain function on the class: not bound to self
        return fetch(
            workspace=self.workspace, **{arg: self.kwargs[url] for arg, url in self.lookup.items()}
        )

    @cached_property
    def object(self):
        return self.get_object()


class WorkspaceObjectView(WorkspaceObjectMixin, WorkspaceTemplateView):
    """A page of one object: the object is in the context as `context_object_name`."""

    def get_context_data(self, **kwargs):
        return super().get_context_data(**{self.context_object_name: self.object, **kwargs})


def bind_input_error(form, exc: InputError) -> None:
    """Show a service's `InputError` on a form: by field where the form has it, else above it."""
    if not exc.field_errors:
        form.add_error(None, exc.message)
        return
    for name, messages_ in exc.field_errors.items():
        for message in messages_:
            form.add_error(name if name in form.fields else None, message)


class WorkspaceFormView(WorkspaceMixin, View):
    """A form page: GET shows the form; POST validates it, makes one service call, redirects.

    Subclasses set `template_name` and `form_class`, and write `perform(form)` (the one
    service call, returning what it made) and `get_success_url(result)`; optionally
    `success_message` (formatted with `result=`), `get_form_kwargs()`, `get_initial()` and
    `get_context_data()`. An invalid form, or an `InputError` from the service (its
    `field_errors` bound to the form's fields), shows the form again with 400; a `Conflict`
    shows it with the message (on `conflict_field`, or above the form) and 409. Other domain
    errors go to `WorkspaceMixin.domain_error_response`.
    """

    template_name: str = ""
    form_class = None
    success_message: str = ""
    conflict_field: str | None = None

    def get_initial(self) -> dict:
        return {}

    def get_form_kwargs(self) -> dict:
        return {}

    def get_form(self, data=None, files=None):
        return self.form_class(data, files, initial=self.get_initial(), **self.get_form_kwargs())

    def get_context_data(self, **kwargs) -> dict:
        return kwargs

    def perform(self, form):
        raise NotImplementedError

    def get_success_url(self, result) -> str:
        raise NotImplementedError

    def get_success_message(self, result) -> str:
        return self.success_message.format(result=result) if self.success_message else ""

    def render_form(self, form, *, status: int = 200, **extra):
        context = self.get_context_data(form=form, **extra)
        return render(self.request, self.template_name, context, status=status)

    def get(self, request, *args, **kwargs):
        return self.render_form(self.get_form())

    def post(self, request, *args, **kwargs):
        form = self.get_form(request.POST, request.FILES)
        if not form.is_valid():
            return self.render_form(form, status=400)
        try:
            result = self.perform(form)
        except InputError as exc:
            bind_input_error(form, exc)
            return self.render_form(form, status=exc.status)
        except Conflict as exc:
            form.add_error(self.conflict_field, exc.message)
            return self.render_form(form, status=exc.status)
        if message := self.get_success_message(result):
            messages.success(request, message)
        return redirect(self.get_success_url(result))


class WorkspaceListView(WorkspaceMixin, View):
    """A filterable, sortable, paginated list. One FilterSet serves the page and the API.

    Subclasses set `template_name`, `get_queryset()`, optionally `filterset_class`,
    `sort_fields` ({param: ordering expression}) and `default_sort`. For htmx requests only
    the `results` region of the template is rendered.

    A FilterSet with a `sort` OrderingFilter supplies the sort names, so the page and the API
    sort by the same names; the page applies the sort itself (its default, a tiebreak, and an
    unknown name ignored rather than failing the filters).
    """

    template_name: str = ""
    filterset_class = None
    paginate_by = 50
    sort_fields: dict[str, str] = {}
    default_sort: str = ""
    region = "results"

    def get_queryset(self):
        raise NotImplementedError

    def get_context_data(self, **kwargs) -> dict:
        return kwargs

    def get_sort_fields(self) -> dict[str, str]:
        filters = getattr(self.filterset_class, "base_filters", {})
        if isinstance(filters.get(SORT_PARAM), django_filters.OrderingFilter):
            return dict(filters[SORT_PARAM].param_map)
        return self.sort_fields

    def get(self, request, *args, **kwargs):
        queryset = self.get_queryset()
        filterset = None
        if self.filterset_class is not None:
            filterset = self.filterset_class(
                request.GET or None, queryset=queryset, request=request
            )
            filterset.filters.pop(SORT_PARAM, None)  # sorted below; not a field of the form
            queryset = filterset.qs if filterset.is_bound and filterset.is_valid() else queryset
        sort = request.GET.get(SORT_PARAM, self.default_sort)
        key = sort.lstrip("-")
        sort_fields = self.get_sort_fields()
        if key in sort_fields:
            expression = sort_fields[key]
            queryset = queryset.order_by(
                f"-{expression}" if sort.startswith("-") else expression, "-pk"
            )
        else:
            sort = ""
        paginator = Paginator(queryset, self.paginate_by)
        page = paginator.get_page(request.GET.get("page"))
        context = self.get_context_data(
            filterset=filterset,
            page_obj=page,
            object_list=page.object_list,
            paginator=paginator,
            sort=sort,
        )
        return render_region(request, self.template_name, self.region, context)


# --- core pages -------------------------------------------------------------


@login_not_required
@never_cache
def healthz(request):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        return JsonResponse({"status": "unavailable", "database": "down"}, status=503)
    return JsonResponse({"status": "ok", "database": "up"})


def home(request):
    """Send the user to their last workspace, or explain that they have none."""
    memberships = list(memberships_for_user(user=request.user))
    if not memberships:
        invitations = selectors.invitations_pending_for_user(user=request.user)
        return render(request, "governance/no_workspace.html", {"invitations": invitations})
    preferred = request.session.get("workspace")
    chosen = next((m for m in memberships if m.workspace.slug == preferred), memberships[0])
    return redirect("dashboard", workspace=chosen.workspace.slug)


def workspace_switch(request):
    slug = request.POST.get("workspace") or request.GET.get("workspace", "")
    membership = membership_get(user=request.user, workspace_slug=slug)
    request.session["workspace"] = membership.workspace.slug
    return redirect("dashboard", workspace=membership.workspace.slug)


class DashboardView(WorkspaceTemplateView):
    template_name = "governance/dashboard.html"

    def get_context_data(self, **kwargs):
        from governance.dashboard import cards_for

        return super().get_context_data(
            cards=cards_for(self.workspace),
            waiting=selectors.waiting_for(membership=self.membership),
            recent_jobs=selectors.jobs_for(workspace=self.workspace)[:5],
            recent_events=selectors.audit_events_for(workspace=self.workspace)[:8],
            **kwargs,
        )


class JobDetailView(WorkspaceObjectView):
    """A job's progress, counts and errors; the progress region polls until the job ends."""

    template_name = "governance/job_detail.html"
    context_object_name = "job"

    def get_object(self):
        return selectors.job_get(workspace=self.workspace, pk=self.kwargs["pk"])

    def get(self, request, *args, **kwargs):
        context = self.get_context_data(sections=sections_for(self.object))
        response = render_region(request, self.template_name, "progress", context)
        if htmx_partial(request) and self.object.is_finished:
            response.status_code = HttpResponseStopPolling.status_code
        return response


class JobListView(WorkspaceListView):
    """Jobs newest first. Unfiltered, repeated refreshes of one target show as one row."""

    template_name = "governance/job_list.html"
    filterset_class = JobFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.jobs_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        jobs = kwargs["object_list"]
        filtered = kwargs["filterset"].is_bound and any(
            kwargs["filterset"].form.cleaned_data.get(name) for name in ("kind", "status", "q")
        )
        if filtered or kwargs["sort"] != self.default_sort:
            rows = [selectors.JobRow(job) for job in jobs]
        else:
            rows = selectors.jobs_collapsed(jobs)
        return super().get_context_data(rows=rows, **kwargs)


class AuditLogView(WorkspaceListView):
    template_name = "governance/audit_log.html"
    filterset_class = AuditEventFilter
    paginate_by = 100

    def get_queryset(self):
        return selectors.audit_events_for(workspace=self.workspace)


class MembersView(WorkspaceTemplateView):
    """Members and their roles. Everyone sees the list; admins invite, re-role and remove,
    and see the open invitations."""

    template_name = "governance/members.html"
    write_role = Role.ADMIN

    def get_context_data(self, **kwargs):
        is_admin = self.membership.has_role(Role.ADMIN)
        return super().get_context_data(
            members=selectors.workspace_members(workspace=self.workspace),
            invitations=(
                selectors.invitations_open_for_workspace(workspace=self.workspace)
                if is_admin
                else []
            ),
            role_choices=forms.ROLE_CHOICES,
            form=kwargs.pop("form", forms.InvitationForm()),
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        back = redirect("members", workspace=self.workspace.slug)
        if "remove" in request.POST:
            membership = self._member(request.POST["remove"])
            if membership.user == request.user:
                messages.error(request, "You cannot remove yourself.")
            else:
                services.membership_remove(membership=membership, actor=request.user)
                messages.success(request, f"Removed {membership.user.username}.")
            return back
        if "revoke" in request.POST:
            invitation = (
                selectors.invitations_open_for_workspace(workspace=self.workspace)
                .filter(pk=_int_or_none(request.POST["revoke"]))
                .first()
            )
            if invitation is None:
                raise Http404("No such open invitation.")
            services.invitation_revoke(invitation=invitation, actor=request.user)
            messages.success(request, f"Revoked the invitation of {invitation.invitee}.")
            return back
        if "member" in request.POST:
            role_form = forms.MemberRoleForm(request.POST)
            if not role_form.is_valid():
                messages.error(request, "Choose one of the roles.")
                return back
            membership = self._member(role_form.cleaned_data["member"])
            role = Role.from_name(role_form.cleaned_data["role"])
            services.membership_set(
                workspace=self.workspace, user=membership.user, role=role, actor=request.user
            )
            messages.success(request, f"{membership.user.username} is now {role.label}.")
            return back
        form = forms.InvitationForm(request.POST)
        if form.is_valid():
            try:
                invitation = services.invitation_create(
                    workspace=self.workspace,
                    invitee=form.cleaned_data["invitee"],
                    role=Role.from_name(form.cleaned_data["role"]),
                    actor=request.user,
                )
            except InputError as exc:
                form.add_error("invitee", exc.message)
            else:
                # The same answer whether or not such a user exists.
                messages.success(
                    request,
                    f"Invited {invitation.invitee} as {invitation.get_role_display()}. They "
                    "see the invitation when they sign in; it expires on "
                    f"{invitation.expires_at:%Y-%m-%d}.",
                )
                return back
        return render(request, self.template_name, self.get_context_data(form=form), status=400)

    def _member(self, pk) -> Membership:
        membership = (
            selectors.workspace_members(workspace=self.workspace)
            .filter(pk=_int_or_none(pk))
            .first()
        )
        if membership is None:
            raise Http404("No such member.")
        return membership


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class InvitationsView(View):
    """The signed-in user's open invitations, to accept or decline."""

    template_name = "governance/invitations.html"

    def get(self, request):
        invitations = selectors.invitations_pending_for_user(user=request.user)
        return render(request, self.template_name, {"invitations": invitations})

    def post(self, request):
        accept = "accept" in request.POST
        invitation = selectors.invitation_for_user(
            user=request.user, pk=_int_or_none(request.POST.get("accept" if accept else "decline"))
        )
        try:
            if accept:
                membership = services.invitation_accept(invitation=invitation, user=request.user)
            else:
                services.invitation_decline(invitation=invitation, user=request.user)
        except DomainError as exc:
            messages.error(request, exc.message)
            return redirect("invitations")
        workspace = invitation.workspace
        if not accept:
            messages.info(request, f"You declined the invitation to {workspace.name}.")
            return redirect("invitations")
        request.session["workspace"] = workspace.slug
        messages.success(request, f"You joined {workspace.name} as {Role(membership.role).label}.")
        return redirect("dashboard", workspace=workspace.slug)


class TokensView(WorkspaceTemplateView):
    """Your API tokens. A new token is shown once, then only its prefix."""

    template_name = "governance/tokens.html"
    write_role = Role.VIEWER

    def get_context_data(self, **kwargs):
        user_filter = None if self.membership.has_role(Role.ADMIN) else self.request.user
        return super().get_context_data(
            tokens=selectors.api_tokens_for(workspace=self.workspace, user=user_filter),
            form=kwargs.pop("form", forms.TokenForm()),
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        if "revoke" in request.POST:
            tokens = ApiToken.objects.filter(workspace=self.workspace)
            if not self.membership.has_role(Role.ADMIN):
                tokens = tokens.filter(user=request.user)
            token = tokens.filter(pk=request.POST["revoke"]).first()
            if token is None:
                raise Http404("No such token.")
            services.api_token_revoke(token=token, actor=request.user)
            messages.success(request, f"Revoked {token.prefix}…")
            return redirect("tokens", workspace=self.workspace.slug)
        form = forms.TokenForm(request.POST)
        if not form.is_valid():
            return render(request, self.template_name, self.get_context_data(form=form), status=400)
        issued = services.api_token_create(
            workspace=self.workspace, user=request.user, actor=request.user, **form.cleaned_data
        )
        response = render(request, self.template_name, self.get_context_data(issued=issued))
        response["Cache-Control"] = "no-store"
        return response


CSRF_FAILURE_MESSAGE = (
    "Your form expired or was sent from another site, so nothing was saved. "
    "Reload the page and try again."
)


def csrf_failure(request, reason=""):
    """CSRF_FAILURE_VIEW: a clear message; app.js shows it when the request came from htmx."""
    response = render(
        request, "governance/csrf_failure.html", {"reason": CSRF_FAILURE_MESSAGE}, status=403
    )
    response["Cache-Control"] = "no-store"
    return response
