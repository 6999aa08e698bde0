"""Error pages that say what happened without revealing whether an object exists elsewhere."""

from django.shortcuts import render


def page_not_found(request, exception=None):
    message = "This page does not exist, or it belongs to a workspace you are not a member of."
    return render(request, "404.html", {"message": message}, status=404)


def permission_denied(request, exception=None):
    reason = str(exception) if exception else "You do not have permission to do this."
    return render(request, "403.html", {"message": reason}, status=403)
