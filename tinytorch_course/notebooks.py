"""Course notebooks: the helpers of `nbcells`, plus the solution and hidden-test markers."""
from .kit.nbcells import (  # noqa: F401  (re-exported: the course tooling reads them from here)
    CRASH_CAUSES, MODULE_PATTERN, cells_by_id, companion_paths, describe_cell, grade_id, heading_before, is_graded,
    is_solution, is_test, module_ids, module_notebooks, notebook_path, read, write)

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
# A cell tag: the cell only draws or times something, and no later cell needs what it defines; the
# grader does not run it (unchanged from the course's notebook) and the answer key is made without it.
SKIP_WHEN_GRADED = "skip-when-graded"


def without_markers(source):
    """A solution cell's source with the `### BEGIN/END SOLUTION` lines removed."""
    return "\n".join(line for line in source.splitlines()
                     if line.strip() not in SOLUTION_MARKERS)


def error_outputs(notebook):
    """`(cell index, grade id, 'Name: message')` for every cell that raised."""
    return [(i, grade_id(cell), f"{out.ename}: {out.evalue}")
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            for out in cell.get("outputs", []) if out.output_type == "error"]


def skipped_when_graded(notebook):
    """The sources of `notebook`'s code cells tagged `SKIP_WHEN_GRADED`."""
    return {cell.source for cell in notebook.cells
            if cell.cell_type == "code" and SKIP_WHEN_GRADED in cell.metadata.get("tags", [])}


def reading_lines(notebook):
    """What a learner reads in a release notebook: its non-blank markdown lines and the non-blank code
    lines outside the cells the learner writes (the measure of a notebook's length)."""
    return sum(1 for cell in notebook.cells
               if cell.cell_type == "markdown" or (cell.cell_type == "code" and not is_solution(cell))
               for line in cell.source.splitlines() if line.strip())
