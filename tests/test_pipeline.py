"""The build pipeline: committed outputs equal a fresh build, and the release leaks nothing."""
from pathlib import Path

import pytest

from tinytorch_course import notebooks
from conftest import REPO

MODULES = notebooks.module_ids(REPO)


def cell_contents(notebook):
    """What a build must reproduce: each cell's type, source and nbgrader metadata (not outputs)."""
    return [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in notebook.cells]


def package_files(root):
    return {p.relative_to(root): p.read_text() for p in sorted((root / "tinytorch").rglob("*.py"))}


def split_regions(source, begin, end):
    """`(inside, outside)`: the stripped, non-empty lines between `begin`/`end` markers, and the rest."""
    inside, outside, within = [], [], False
    for line in source.splitlines():
        if line.strip() in (begin, end):
            within = line.strip() == begin
        elif line.strip():
            (inside if within else outside).append(line.strip())
    return inside, outside


def test_package_equals_a_fresh_nbdev_export(built_course):
    assert package_files(built_course) == package_files(REPO)


@pytest.mark.parametrize("folder", ["release", "solutions"])
@pytest.mark.parametrize("module_id", MODULES)
def test_generated_notebooks_equal_a_fresh_build(built_course, folder, module_id):
    fresh = notebooks.read(notebooks.notebook_path(built_course, folder, module_id))
    committed = notebooks.read(notebooks.notebook_path(REPO, folder, module_id))
    assert cell_contents(fresh) == cell_contents(committed), \
        f"{folder}/{module_id} is stale: run ./course build and commit the result"


def test_release_and_solutions_hold_exactly_the_modules():
    for folder in ["release", "solutions"]:
        assert sorted(p.name for p in (REPO / folder).iterdir()) == MODULES


@pytest.mark.parametrize("module_id", MODULES)
def test_source_notebooks_are_stored_clean(module_id):
    notebook = notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {index} has outputs"
        marked = any(m in cell.source for m in notebooks.SOLUTION_MARKERS + notebooks.HIDDEN_MARKERS)
        if marked:
            assert "nbgrader" in cell.metadata, f"cell {index} has markers but no nbgrader metadata"
    ids = [notebooks.grade_id(c) for c in notebook.cells if notebooks.grade_id(c)]
    assert len(ids) == len(set(ids)), "grade ids must be unique"


@pytest.mark.parametrize("module_id", MODULES)
def test_release_contains_no_solution_code_and_no_hidden_tests(module_id):
    source = notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))
    release_files = [p for p in (REPO / "release").rglob("*") if p.is_file()]
    release_text = "\n".join(path.read_text(errors="replace") for path in release_files)
    for marker in notebooks.SOLUTION_MARKERS + notebooks.HIDDEN_MARKERS:
        assert marker not in release_text
    release_lines = {line.strip() for path in release_files for line in (
        "\n".join(c.source for c in notebooks.read(path).cells) if path.suffix == ".ipynb"
        else path.read_text(errors="replace")).splitlines()}
    secret, public = [], set()
    for cell in source.cells:
        hidden, rest = split_regions(cell.source, *notebooks.HIDDEN_MARKERS)
        solution, rest = split_regions("\n".join(rest), *notebooks.SOLUTION_MARKERS)
        secret += hidden + solution
        public |= set(rest)  # a line that also stands outside the regions may stay in the release
    leaked = [line for line in secret if len(line) > 12 and line not in public and line in release_lines]
    assert not leaked, f"release/{module_id} shows solution or hidden-test lines: {leaked[:5]}"
    assert secret, "a module without solutions or hidden tests grades nothing"
