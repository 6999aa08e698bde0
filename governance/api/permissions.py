"""Workspace resolution and role checks for every API view."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, permissions

from governance.models import Membership, Role
from governance.selectors import memberships_for_user

WORKSPACE_HEADER = "HTTP_X_WORKSPACE"


def resolve_api_workspace(request) -> Membership:
    """The workspace an API request acts in.

    A token fixes it. With a session, the `X-Workspace` header or `?workspace=` names it,
    else the last workspace used in the browser, else the user's only workspace.
    """
    django_request = getattr(request, "_request", request)
    membership = getattr(django_request, "membership", None)
    if membership is not None:
        return membership
    slug = request.META.get(WORKSPACE_HEADER) or request.GET.get("workspace")
    memberships = memberships_for_user(user=request.user)
    if slug:
        membership = memberships.filter(workspace__slug=slug).first()
        if membership is None:
            raise Http404("No such workspace, or you are not a member of it.")
    else:
        session_slug = request.session.get("workspace") if hasattr(request, "session") else None
        if session_slug:
            membership = memberships.filter(workspace__slug=session_slug).first()
        if membership is None:
            candidates = list(memberships[:2])
            if len(candidates) != 1:
                raise exceptions.ValidationError(
                    {"workspace": "Name the workspace with the X-Workspace header."}
                )
            membership = candidates[0]
    django_request.workspace = membership.workspace
    django_request.membership = membership
    return membership


def required_role(view, request) -> int:
    action_roles = getattr(view, "action_roles", {}) or {}
    action = getattr(view, "action", None)
    if action and action in action_roles:
        return action_roles[action]
    if request.method in action_roles:
        return action_roles[request.method]
    if request.method in permissions.SAFE_METHODS:
        return getattr(view, "read_role", Role.VIEWER)
    return getattr(view, "write_role", Role.EDITOR)


def ensure_detail_object_exists(view) -> None:
    """On a detail route, 404 unless the object is in the view's (workspace-scoped) queryset.

    Called before answering 403, so that an object of another workspace is "not found"
    whatever the caller's role, as the view itself would answer once the role allowed it.
    """
    get_queryset = getattr(view, "get_queryset", None)
    kwargs = getattr(view, "kwargs", None) or {}
    lookup_kwarg = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
    if get_queryset is None or not lookup_kwarg or lookup_kwarg not in kwargs:
        return
    field = getattr(view, "lookup_field", None) or lookup_kwarg
    try:
        found = get_queryset().filter(**{field: kwargs[lookup_kwarg]}).exists()
    except (TypeError, ValueError, DjangoValidationError):
        found = False  # a malformed id names nothing
    if not found:
        raise Http404("Not found.")


class WorkspaceRolePermission(permissions.BasePermission):
    """Authenticated, a member of the request's workspace, and in a role high enough.

    A caller whose role is too low still gets 404, not 403, for an object that is not in
    the workspace: a 403 would confirm that the id exists somewhere.
    """

    def has_permission(self, request, view) -> bool:
        if request.user is None or not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        membership = resolve_api_workspace(request)
        needed = required_role(view, request)
        if membership.role < needed:
            ensure_detail_object_exists(view)
            raise exceptions.PermissionDenied(
                f"This needs the {Role(needed).label} role; you are {Role(membership.role).label} "
                f"in {membership.workspace.slug}."
            )
        return True
