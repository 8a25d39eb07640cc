"""Run a notebook the way `nbgrader autograde` does and score its test cells with nbgrader's rule."""
import nbformat
from nbclient import NotebookClient
from nbgrader.utils import determine_grade

from tinytorch_course import notebooks
from tinytorch_course.nbgrader_api import GRADER_KERNEL, install_grader_kernel


def execute(notebook, workdir, timeout=120):
    """Execute `notebook` (a copy) in the isolated grading kernel, errors allowed."""
    install_grader_kernel()
    notebook = nbformat.from_dict(notebook)
    client = NotebookClient(notebook, timeout=timeout, kernel_name=GRADER_KERNEL, allow_errors=True,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return notebook


def test_scores(notebook):
    """`{grade id: (score, max)}` for every autograded test cell of an executed notebook."""
    return {notebooks.grade_id(c): determine_grade(c) for c in notebook.cells
            if notebooks.is_graded(c) and not notebooks.is_solution(c)}


def with_cell_replacement(notebook, grade_id, old, new):
    """A copy of `notebook` whose cell `grade_id` has `old` replaced by `new` (exactly once)."""
    notebook = nbformat.from_dict(notebook)
    cell = notebooks.cells_by_id(notebook)[grade_id]
    count = cell.source.count(old)
    if count != 1:
        raise ValueError(f"{old!r} occurs {count} times in cell {grade_id}; it must occur once")
    cell.source = cell.source.replace(old, new)
    return notebook
