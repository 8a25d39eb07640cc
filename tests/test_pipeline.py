"""The build pipeline: committed outputs equal a fresh build, and the release leaks nothing."""
import pytest

from tinytorch_course import notebooks
from tinytorch_course.build.pipeline import check_release
from tinytorch_course.nbgrader_api import CourseError
from tinytorch_course.build.leaks import leaks, secret_lines
from conftest import REPO

MODULES = notebooks.module_ids(REPO)
# every notebook of the course, `NN_name/NN_name.ipynb` and its companions `NN_name/NN_name_*.ipynb`
NOTEBOOKS = [path.relative_to(REPO / "modules").as_posix()
             for m in MODULES for path in notebooks.module_notebooks(REPO, "modules", m)]
COMPANIONS = [name for name in NOTEBOOKS if name not in {f"{m}/{m}.ipynb" for m in MODULES}]


def cell_contents(notebook):
    """What a build must reproduce: each cell's type, source and nbgrader metadata (not outputs)."""
    return [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in notebook.cells]


def package_files(root):
    return {p.relative_to(root): p.read_text() for p in sorted((root / "tinytorch").rglob("*.py"))}


def test_package_equals_a_fresh_nbdev_export(built_course):
    assert package_files(built_course) == package_files(REPO)


@pytest.mark.parametrize("folder", ["release", "solutions"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_generated_notebooks_equal_a_fresh_build(built_course, folder, name):
    fresh = notebooks.read(built_course / folder / name)
    committed = notebooks.read(REPO / folder / name)
    assert cell_contents(fresh) == cell_contents(committed), \
        f"{folder}/{name} is stale: run ./course build and commit the result"


@pytest.mark.parametrize("folder", ["release", "solutions"])
def test_a_fresh_build_writes_the_committed_files_byte_for_byte(built_course, folder):
    """`./course build` (and so `./course demo`) of an unchanged course leaves `git status` clean:
    the answer keys are run as the grader runs them, without timings or figures."""
    def files(root):
        return {p.relative_to(root): p.read_bytes() for p in sorted((root / folder).rglob("*")) if p.is_file()}

    fresh, committed = files(built_course), files(REPO)
    changed = sorted(str(path) for path in set(fresh) | set(committed) if fresh.get(path) != committed.get(path))
    assert not changed, f"a build changes {changed}: run ./course build twice and compare the outputs"


def test_release_and_solutions_hold_exactly_the_modules():
    for folder in ["release", "solutions"]:
        assert sorted(p.name for p in (REPO / folder).iterdir()) == MODULES


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_source_notebooks_are_stored_clean(name):
    notebook = notebooks.read(REPO / "modules" / name)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {index} has outputs"
        marked = any(m in cell.source for m in notebooks.SOLUTION_MARKERS + notebooks.HIDDEN_MARKERS)
        if marked:
            assert "nbgrader" in cell.metadata, f"cell {index} has markers but no nbgrader metadata"
    ids = [notebooks.grade_id(c) for c in notebook.cells if notebooks.grade_id(c)]
    assert len(ids) == len(set(ids)), "grade ids must be unique"


@pytest.mark.parametrize("name", COMPANIONS)
def test_a_companion_is_released_to_read_and_grades_nothing(name):
    """A companion notebook (given breadth) has no nbgrader cells: nothing in it is graded, and it is
    released as it is."""
    source = notebooks.read(REPO / "modules" / name)
    assert not [i for i, c in enumerate(source.cells) if "nbgrader" in c.metadata], f"{name} has nbgrader cells"
    assert [c.source for c in notebooks.read(REPO / "release" / name).cells] == [c.source for c in source.cells]


def test_the_course_has_a_companion():
    assert "03_autograd/03_autograd_more.ipynb" in COMPANIONS  # the tests above run on at least one


def test_release_contains_no_solution_code_and_no_hidden_tests():
    sources = [notebooks.read(notebooks.notebook_path(REPO, "modules", m)) for m in MODULES]
    release_files = [p for p in (REPO / "release").rglob("*") if p.is_file()]
    companions = [notebooks.read(REPO / "modules" / name) for name in COMPANIONS]  # given code: public lines
    assert not leaks(source_notebooks=sources + companions, files=release_files)
    for module_id, source in zip(MODULES, sources):
        assert secret_lines(source), f"{module_id}: a module without solutions or hidden tests grades nothing"


@pytest.mark.parametrize("module_id", MODULES)
def test_release_test_cells_check_something(module_id):
    """The build's own rule: a test cell left with code but no check would print success for
    tests that never ran."""
    check_release(notebooks.notebook_path(REPO, "release", module_id))


def test_a_print_only_test_cell_is_refused(tmp_path):
    notebook = notebooks.read(notebooks.notebook_path(REPO, "release", MODULES[0]))
    cell = next(c for c in notebook.cells if notebooks.is_test(c))
    cell.source = 'helper = 1\nprint("hidden tests pass")'
    notebooks.write(notebook, tmp_path / "print_only.ipynb")
    with pytest.raises(CourseError, match=notebooks.grade_id(cell)):
        check_release(tmp_path / "print_only.ipynb")
