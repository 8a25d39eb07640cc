"""Each main notebook holds one idea and fits a reading: at most READING_BUDGET lines (markdown and
given code, the learner's own cells left out). Breadth goes to a companion notebook (`NN_name_more.ipynb`, given
code to read, exported with the module), never into a main notebook."""
import pytest

from tinytorch_course import notebooks
from conftest import REPO

READING_BUDGET = 1400


@pytest.mark.parametrize("module_id", notebooks.module_ids(REPO))
def test_a_main_notebook_fits_a_reading(module_id):
    length = notebooks.reading_lines(notebooks.read(notebooks.notebook_path(REPO, "release", module_id)))
    assert length <= READING_BUDGET, f"release/{module_id} is {length} lines to read (limit {READING_BUDGET}): " \
                                     "move given breadth to the module's companion notebook"


def test_reading_lines_count_what_a_learner_reads():
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\ntext"),
        nbformat.v4.new_code_cell("x = 1\n\n# a comment"),
        nbformat.v4.new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()",
                                  metadata={"nbgrader": {"solution": True, "grade_id": "a"}})])
    assert notebooks.reading_lines(nb) == 4
