"""The site's URLs plus one screen built on `WorkspaceFormView`, for its tests."""

from django import forms
from django.urls import path

from governance.errors import Conflict, InputError
from governance.services import audit_record
from governance.urls import urlpatterns as site_urlpatterns
from governance.views import WorkspaceFormView


class NoteForm(forms.Form):
    title = forms.CharField(max_length=20)
    body = forms.CharField(required=False)


def note_record(*, workspace, actor, title: str, body: str):
    """A write with the service's shape: refuses some input, conflicts on some, else audits."""
    if title == "taken":
        raise InputError.for_fields({"title": "That title is taken.", "elsewhere": "Not here."})
    if title == "plain":
        raise InputError("Nothing is wrong with one field; the whole note is refused.")
    if title == "busy":
        raise Conflict("Someone else is writing this note.")
    return audit_record(workspace=workspace, actor=actor, action="note.record", data={"t": title})


class NoteCreateView(WorkspaceFormView):
    template_name = "includes/form_fields.html"
    form_class = NoteForm
    success_message = "Recorded event #{result.pk}."

    def get_initial(self):
        return {"body": "start here"}

    def perform(self, form):
        return note_record(workspace=self.workspace, actor=self.request.user, **form.cleaned_data)

    def get_success_url(self, result):
        return self.wreverse("audit_log")


urlpatterns = [
    *site_urlpatterns,
    path("w/<slug:workspace>/test-notes/new/", NoteCreateView.as_view(), name="test_note_create"),
]
