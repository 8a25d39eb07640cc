"""The build refuses a notebook whose visible cells read a name that only hidden tests bind: the
release has no hidden tests, so every learner would get a NameError there."""
import nbformat
import pytest

from tinytorch_course import notebooks
from tinytorch_course.build.pipeline import build
from tinytorch_course.build.hidden_names import hidden_only_reads
from tinytorch_course.nbgrader_api import CourseError
from conftest import REPO, copy_course

MODULES = notebooks.module_ids(REPO)
BEGIN, END = notebooks.HIDDEN_MARKERS


def notebook_of(*cells):
    """A notebook of code cells, each `(grade id, source)`."""
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade_id": gid}}) for gid, source in cells])


def hidden(code):
    return f"# Hidden tests run when your work is graded.\n{BEGIN}\n{code}\n{END}"


def reads(*cells):
    """`[(reading cell's grade id, name)]` of the reads the check refuses."""
    return [(cell.split("(")[1].rstrip(")"), name) for cell, _, name, _ in hidden_only_reads(notebook_of(*cells))]


@pytest.mark.parametrize("module_id", MODULES)
def test_no_course_notebook_reads_a_name_only_its_hidden_tests_bind(module_id):
    assert hidden_only_reads(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))) == []


@pytest.mark.parametrize("binding", [
    "from tinytorch.tensor_base import seed_all", "import seed_all", "import numpy as seed_all",
    "seed_all = 1", "seed_all, other = 1, 2", "seed_all += 1", "for seed_all in range(2): pass",
    "with open(__file__) as seed_all: pass", "def seed_all(): pass", "class seed_all: pass",
    "(seed_all := 3)", "[(seed_all := i) for i in range(2)]",
    "try:\n    pass\nexcept ValueError as seed_all:\n    pass",
    "def f():\n    global seed_all\n    seed_all = 1",
])
def test_every_kind_of_binding_in_a_hidden_region_counts(binding):
    assert reads(("a_hidden", hidden(binding)), ("b_visible", "seed_all(0)")) == [("b_visible", "seed_all")]


@pytest.mark.parametrize("reader", [
    "def later():\n    return seed_all(0)",  # read when called, from the notebook's namespace
    "class Later:\n    x = seed_all",
    "values = [seed_all for _ in range(2)]",
    "f = lambda: seed_all",
    "def later(x=seed_all):\n    pass",
    "%time seed_all(0)\nprint(seed_all)",  # a magic line: the rest of the cell is still read
])
def test_reads_in_functions_classes_and_comprehensions_count(reader):
    assert reads(("a_hidden", hidden("seed_all = 1")), ("b_visible", reader)) == [("b_visible", "seed_all")]


@pytest.mark.parametrize("reader", [
    "def own(seed_all):\n    return seed_all",
    "def own():\n    seed_all = 2\n    return seed_all",
    "values = [seed_all for seed_all in range(2)]",
    "f = lambda seed_all: seed_all",
    "def outer():\n    seed_all = 1\n    def inner():\n        return seed_all\n    return inner",
    "class C:\n    def m(self, seed_all):\n        return seed_all",
    # a decorator runs in the class: the property's own name, not the notebook's (module 03's Tensor.data)
    "class C:\n    @property\n    def seed_all(self):\n        return 1\n    @seed_all.setter\n"
    "    def seed_all(self, value):\n        pass",
])
def test_local_names_are_not_reads_of_the_notebooks_namespace(reader):
    assert reads(("a_hidden", hidden("seed_all = 1")), ("b_visible", reader)) == []


def test_a_name_bound_visibly_as_well_or_read_only_in_hidden_regions_is_fine():
    assert reads(("given", "from tinytorch.tensor_base import manual_seed"),
                 ("a_hidden", hidden("from tinytorch.tensor_base import manual_seed\nmanual_seed(1)\nw = 2")),
                 ("b_visible", "manual_seed(0)"),
                 ("b_hidden", hidden("print(w)"))) == []


def test_builtins_rebound_in_hidden_tests_are_not_reported():
    assert reads(("a_hidden", hidden("max = 3")), ("b_visible", "max(1, 2)")) == []


def test_the_visible_part_of_a_partly_hidden_cell_counts():
    assert reads(("mixed", f"x = 1\n{BEGIN}\nsecret = 2\n{END}\nprint(secret)")) == [("mixed", "secret")]


def test_the_build_refuses_module_04s_seed_read_only_in_hidden_tests(tmp_path):
    """Module 04's `linear_layers_visible` once called `manual_seed`, which only a hidden cell
    imported: undo the fix in a copy, and the build names the notebook, the cell and the name."""
    course = copy_course(tmp_path / "course")
    path = notebooks.notebook_path(course, "modules", "04_layers")
    notebook = notebooks.read(path)
    cell = notebooks.cells_by_id(notebook)["linear_layers_visible"]
    fix = "from tinytorch.tensor_base import manual_seed  # seeds the default generator\n"
    assert cell.source.startswith(fix)
    cell.source = cell.source[len(fix):]
    notebooks.write(notebook, path)
    with pytest.raises(CourseError) as refused:
        build(course, log=lambda message: None)
    message = str(refused.value)
    assert str(path) in message and "(linear_layers_visible), line 1: reads 'manual_seed'" in message, message
    assert "hidden tests of cell" in message and "(init_functions_hidden)" in message, message
