"""Reading course notebooks: the module list and the nbgrader metadata of their cells.

Learner-safe: the workspace kit ships a copy of this file (tinytorch_kit/nbcells.py), so it
must never mention solutions or hidden tests by their markers.
"""
from pathlib import Path
import re

import nbformat

MODULE_PATTERN = re.compile(r"^\d\d_[a-z_]+$")
CRASH_CAUSES = ("and in the code it calls, for what ends the process: os._exit or os.abort, memory running "
                "out, or a crash in C code such as a numpy view that reads outside its array (as_strided with "
                "a layout that reaches past its storage)")  # what to look for when a kernel died


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


def companion_paths(root, folder, module_id):
    """`root/folder/NN_name/NN_name_*.ipynb`: the module's companion notebooks (given code to read, no
    exercises, exported with the module, e.g. `03_autograd_more.ipynb`)."""
    return sorted((Path(root) / folder / module_id).glob(f"{module_id}_*.ipynb"))


def module_notebooks(root, folder, module_id):
    """The module's notebook, then its companions."""
    return [notebook_path(root, folder, module_id), *companion_paths(root, folder, module_id)]


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


def is_test(cell):
    """An autograded test cell (graded, and not a cell the learner writes)."""
    return is_graded(cell) and not is_solution(cell)


def cells_by_id(notebook):
    """Map grade id -> cell for every nbgrader cell of `notebook`."""
    return {grade_id(c): c for c in notebook.cells if grade_id(c)}


def heading_before(notebook, index):
    """The last markdown heading (`# ...` to `###### ...`) above cell `index`, without its `#`s
    ("" if none): the part or exercise a cell belongs to."""
    for cell in reversed(notebook.cells[:index]):
        if cell.cell_type == "markdown":
            found = [line.lstrip("#").strip() for line in cell.source.splitlines()
                     if re.match(r"#{1,6}\s", line)]
            if found:
                return found[-1]
    return ""


def describe_cell(notebook, index):
    """`cell 7 (window_layout_visible, under "Exercise 1 — ...")`: a cell as a learner finds it."""
    cell = notebook.cells[index] if 0 <= index < len(notebook.cells) else None
    gid = grade_id(cell) if cell is not None else None
    heading = heading_before(notebook, index)
    detail = ", ".join(([gid] if gid else []) + ([f'under "{heading}"'] if heading else []))
    return f"cell {index}" + (f" ({detail})" if detail else "")
