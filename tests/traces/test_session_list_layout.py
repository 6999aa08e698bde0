"""The sessions list's project cell: the end of a long path, never a break after its "…"."""

from traces.views import PROJECT_CHARS, project_tail


def test_project_tail_keeps_the_end_of_a_long_path():
    assert project_tail("") == "" and project_tail("/srv/app") == "/srv/app"
    exact = "/" + "a" * (PROJECT_CHARS - 1)
    assert project_tail(exact) == exact
    long = "/home/developer/workspaces/checkout-service-1"
    tail = project_tail(long)
    assert tail == "…\u2060" + long[-(PROJECT_CHARS - 1) :]
    assert len(tail) == PROJECT_CHARS + 1 and long.endswith(tail[2:])
