"""Helpers of the tests that work in a learner's kit as a learner does: `./learn`, and the reference
solution typed into the release notebooks."""
import os
import re
import subprocess
import sys

from tinytorch_course import notebooks
from conftest import REPO


def shows(table, name, state):
    """Whether a `status` table has the row `name  state` (columns are padded to the longest name)."""
    return re.search(rf"^\s*{re.escape(name)}\s+{re.escape(state)}", table, re.M) is not None


def learn(workspace, *args, env=None):
    """`./learn ARGS` in the workspace, with this Python (the same pinned environment as .venv)."""
    env = dict(os.environ, LEARN_PYTHON=sys.executable, **(env or {}))
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(workspace / "learn"), *args], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=900)
    return result.returncode, result.stdout + result.stderr


def fill_solutions(workspace, module_id, course=REPO):
    """Do every exercise of a module the way the reference solution does: only the solution cells
    change, so the notebook keeps the release's visible tests and nothing of the hidden ones."""
    source = notebooks.cells_by_id(notebooks.read(notebooks.notebook_path(course, "modules", module_id)))
    path = notebooks.notebook_path(workspace, "modules", module_id)
    notebook = notebooks.read(path)
    for cell in notebook.cells:
        if notebooks.is_solution(cell):
            cell.source = notebooks.without_markers(source[notebooks.grade_id(cell)].source)
    notebooks.write(notebook, path)


def course_command(course, *args):
    """`./course ARGS` in a copy of the course (its own tinytorch_course, so that ROOT is the copy)."""
    result = subprocess.run([sys.executable, "-m", "tinytorch_course", *map(str, args)], cwd=course,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"./course {' '.join(map(str, args))}:\n{result.stdout}{result.stderr}"
    return result.stdout
