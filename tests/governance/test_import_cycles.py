"""The import-cycle report (`python -m tests.import_cycles`): what it counts, and that no
new cycle appears between our modules."""

from tests.import_cycles import cycles, import_graph

# None left: the last (the analytics services and the post-compaction services importing
# each other inside functions) went when the section's computation moved to its own module.
KNOWN_CYCLES = []


def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_function_level_import_makes_a_cycle_and_a_re_export_does_not(tmp_path):
    write(tmp_path, "specs/__init__.py", "")
    write(tmp_path, "specs/services/__init__.py", "from specs.services.versions import approve\n")
    write(tmp_path, "specs/services/versions.py", "def approve():\n    return 1\n")
    write(
        tmp_path, "specs/selectors.py", "def current():\n    from specs.services import approve\n"
    )
    write(
        tmp_path,
        "specs/services/packages.py",
        "from .. import selectors\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from specs.tasks import build\n",
    )
    write(tmp_path, "specs/tasks.py", "from specs.services import packages\n")
    graph = import_graph(tmp_path, apps=("specs",))
    assert graph["specs.services"] == {"specs.services.versions"}
    assert graph["specs.services.packages"] == {"specs.selectors"}
    assert graph["specs.selectors"] == {"specs.services"}
    assert cycles(graph) == []

    write(tmp_path, "specs/services/versions.py", "def approve():\n    import specs.selectors\n")
    assert cycles(import_graph(tmp_path, apps=("specs",))) == [
        ["specs.selectors", "specs.services", "specs.services.versions"]
    ]


def test_cycles_groups_every_module_on_a_loop_once():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_cycle_between_our_modules_beyond_the_known_one():
    assert cycles(import_graph()) == KNOWN_CYCLES
