"""The commit and output-size rules live once (specs.validators); every layer answers with them."""

import pytest
from django.core.exceptions import ValidationError

from governance.errors import InputError
from specs import services
from specs.formats.restart import Repository
from specs.models import RestartPackage, Verification
from specs.validators import COMMIT_MESSAGE, MAX_OUTPUT_BYTES

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("commit", ["HEAD", "abc12", "0123abcd" * 9, "abcdef1\n"])
def test_the_model_fields_refuse_a_commit_that_is_not_a_hash(commit):
    for model in (RestartPackage, Verification):
        with pytest.raises(ValidationError) as caught:
            model._meta.get_field("commit").run_validators(commit)
        assert COMMIT_MESSAGE in caught.value.messages


def test_the_service_refuses_a_handoff_commit_that_is_not_a_hash(authoritative, make_package):
    _spec, v1 = authoritative()
    with pytest.raises(InputError) as caught:
        make_package(v1, repository=Repository(commit="main"))
    assert caught.value.field_errors == {"commit": [COMMIT_MESSAGE]}
    assert not RestartPackage.objects.exists()


def test_the_service_refuses_a_verification_commit_and_oversized_output(
    authoritative, make_package
):
    _spec, v1 = authoritative()
    verification = services.VerificationInput(
        command="pytest", exit_status=0, commit="HEAD", output="x" * (MAX_OUTPUT_BYTES + 1)
    )
    with pytest.raises(InputError) as caught:
        make_package(v1, verifications=[verification])
    errors = caught.value.field_errors
    assert errors["commit"] == [COMMIT_MESSAGE]
    assert errors["output"] == [f"Raw output is over the limit of {MAX_OUTPUT_BYTES:,} bytes."]


def test_the_api_and_the_form_answer_with_the_same_commit_message(api_for, authoritative):
    from specs.api.serializers import RepositorySerializer, VerificationSerializer
    from specs.forms import PackageForm

    for serializer in (RepositorySerializer, VerificationSerializer):
        payload = serializer(data={"commit": "main", "command": "x", "exit_status": 0})
        assert not payload.is_valid()
        assert payload.errors["commit"] == [COMMIT_MESSAGE]
    form = PackageForm({"commit": "main"})
    form.is_valid()
    assert form.errors["commit"] == [COMMIT_MESSAGE]
