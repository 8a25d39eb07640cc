"""Each main notebook holds one idea and fits a reading: at most READING_BUDGET lines (markdown and
given code, the learner's own cells left out). Breadth goes elsewhere, never into a main notebook."""
import pytest

from tinytorch_course import notebooks
from conftest import REPO

READING_BUDGET = 1400
# Notebooks still over the budget, at their length after the 2026-12-06 merges: they may
# shrink, never grow. Module 03's given breadth (Part 9, "More ops, given") is to move out.
OVER_BUDGET = {"03_autograd": 1864}


@pytest.mark.parametrize("module_id", notebooks.module_ids(REPO))
def test_a_main_notebook_fits_a_reading(module_id):
    length = notebooks.reading_lines(notebooks.read(notebooks.notebook_path(REPO, "release", module_id)))
    limit = OVER_BUDGET.get(module_id, READING_BUDGET)
    assert length <= limit, f"release/{module_id} is {length} lines to read (limit {limit}; the goal is " \
                            f"{READING_BUDGET}): move given breadth out of the main notebook"


def test_reading_lines_count_what_a_learner_reads():
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\ntext"),
        nbformat.v4.new_code_cell("x = 1\n\n# a comment"),
        nbformat.v4.new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()",
                                  metadata={"nbgrader": {"solution": True, "grade_id": "a"}})])
    assert notebooks.reading_lines(nb) == 4
