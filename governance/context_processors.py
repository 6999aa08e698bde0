"""Template context: the current workspace, the user's role, the menu and the switcher."""

from governance.models import Role
from governance.navigation import menu_for
from governance.selectors import invitations_pending_for_user, memberships_for_user


def workspace(request):
    current = getattr(request, "workspace", None)
    membership = getattr(request, "membership", None)
    if current is None or membership is None or not request.user.is_authenticated:
        return {}
    return {
        "workspace": current,
        "membership": membership,
        "role_name": Role(membership.role).label,
        "can_edit": membership.has_role(Role.EDITOR),
        "can_review": membership.has_role(Role.REVIEWER),
        "is_admin": membership.has_role(Role.ADMIN),
        "nav_menu": menu_for(workspace=current, role=membership.role, current_path=request.path),
        "other_memberships": memberships_for_user(user=request.user).exclude(workspace=current),
        # A callable: the query runs only where a full page shows the banner.
        "pending_invitation_count": lambda: invitations_pending_for_user(user=request.user).count(),
    }
