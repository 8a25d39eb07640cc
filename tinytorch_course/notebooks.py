"""Reading course notebooks: the module list, nbgrader cells, and the code a cell would run."""
from pathlib import Path
import re

import nbformat

MODULE_PATTERN = re.compile(r"^\d\d_[a-z_]+$")
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def module_ids(root):
    """The assignment ids (`NN_name`) of the course rooted at `root`, in order."""
    source = Path(root) / "modules"
    found = [p.name for p in sorted(source.iterdir())
             if MODULE_PATTERN.match(p.name) and (p / f"{p.name}.ipynb").is_file()]
    if not found:
        raise FileNotFoundError(f"no modules/NN_name/NN_name.ipynb notebooks under {source}")
    return found


def notebook_path(root, folder, module_id):
    """`root/folder/NN_name/NN_name.ipynb`."""
    return Path(root) / folder / module_id / f"{module_id}.ipynb"


def read(path):
    return nbformat.read(str(path), as_version=4)


def write(notebook, path):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))


def grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def is_solution(cell):
    return cell.metadata.get("nbgrader", {}).get("solution", False)


def is_graded(cell):
    return cell.metadata.get("nbgrader", {}).get("grade", False)


def cells_by_id(notebook):
    """Map grade id -> cell for every nbgrader cell of `notebook`."""
    return {grade_id(c): c for c in notebook.cells if grade_id(c)}


def without_markers(source):
    """A solution cell's source with the `### BEGIN/END SOLUTION` lines removed."""
    return "\n".join(line for line in source.splitlines()
                     if line.strip() not in SOLUTION_MARKERS)


def error_outputs(notebook):
    """`(cell index, grade id, 'Name: message')` for every cell that raised."""
    return [(i, grade_id(cell), f"{out.ename}: {out.evalue}")
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            for out in cell.get("outputs", []) if out.output_type == "error"]
