"""A crash explains itself and costs only its exercise: `./learn check` on a kernel that dies, and
grading a module-08 notebook whose kernel dies (or whose window layout forgets the dilation)."""
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from tinytorch_course import notebooks
from tinytorch_course.grading import grading
from tinytorch_course.kit.learner import is_visible_test
from tinytorch_course.grading.sandbox import cell_to_reset
from tinytorch_course.kit.workspace import make_workspace

from conftest import REPO

pytestmark = pytest.mark.xdist_group("crash")  # one worker grades the class, once (--dist loadgroup)
CONV = "08_conv"


def with_solutions(notebook, reference, change=None):
    """`notebook` with every solution cell as the reference solution has it, `change[grade id]` added
    at the end of the cells it names."""
    source = notebooks.cells_by_id(reference)
    for cell in notebook.cells:
        if notebooks.is_solution(cell):
            gid = notebooks.grade_id(cell)
            cell.source = notebooks.without_markers(source[gid].source) + (change or {}).get(gid, "")
    return notebook


# ---------------------------------------------------------------- ./learn check


def test_check_reports_a_dead_kernel_and_prints_the_whole_table(tmp_path):
    workspace = make_workspace(REPO, tmp_path, log=lambda message: None)[0]
    module = "01_tensor"
    path = notebooks.notebook_path(workspace, "modules", module)
    reference = notebooks.read(notebooks.notebook_path(REPO, "modules", module))
    notebooks.write(with_solutions(notebooks.read(path), reference,
                                   {"storage_index": "\nimport os\nos.abort()\n"}), path)
    env = dict(os.environ, LEARN_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    learn = [str(workspace / "learn")]
    assert subprocess.run(learn + ["export", "01"], cwd=workspace, env=env, capture_output=True).returncode == 0
    result = subprocess.run(learn + ["check", "01"], cwd=workspace, env=env, capture_output=True, text=True,
                            timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out and "nbclient" not in out, out
    for gid in [notebooks.grade_id(c) for c in notebooks.read(path).cells if is_visible_test(c)]:
        assert re.search(rf"^{gid}\s+\d+\s+(pass|FAIL)\s+(pass|FAIL)$", out, re.M), (gid, out)  # every row
    for run, cell in [("in the notebook", r'\(storage_index, under "'), ("against tinytorch.tensor_base", "")]:
        assert re.search(rf"^kernel died \({run}\): the kernel died while cell \d+ {cell}.*\(killed by SIGABRT\): "
                         r"look in that cell", out, re.M), out  # the package dies when it is imported
    assert re.search(r"^dtypes_visible\s+\d+\s+pass\s+FAIL$", out, re.M), out  # before the crash: it ran
    assert re.search(r"^first failure: dtypes_visible \(package\)\n    NotRun: not run: the kernel died before, "
                     r"while cell \d+ ", out, re.M), out


# ---------------------------------------------------------------- grading


def test_a_crash_resets_the_last_solution_cell_at_or_before_it_that_is_not_a_stub_yet():
    def cell(source, gid=None, solution=False, grade=False):
        meta = {"nbgrader": {"grade_id": gid, "solution": solution, "grade": grade}} if gid else {}
        return nbformat.v4.new_code_cell(source, metadata=meta)

    stubs = {"a": "raise NotImplementedError()", "b": "raise NotImplementedError()"}
    notebook = nbformat.v4.new_notebook(cells=[
        cell("import numpy"), cell("def a(): 1", "a", solution=True), cell("a()", "a_test", grade=True),
        cell(stubs["b"], "b", solution=True), cell("b()", "b_test", grade=True), cell("print('given')")])
    assert [cell_to_reset(notebook, running, stubs) for running in [None, 0, 1, 2, 3, 4, 5, 9]] == [
        None, None, 1, 1, 1, 1, 1, 1]  # 3 is its stub already; 9: the grader's own last cell
    notebook.cells[3].source = "def b(): 2"
    assert [cell_to_reset(notebook, running, stubs) for running in [2, 3, 4, 5]] == [1, 3, 3, 3]


@pytest.fixture(scope="module")
def crash_class(built_course, tmp_path_factory):
    """Module 08 graded for: the reference solution; one whose Exercise 3 aborts the process; one whose
    `window_layout` forgets the dilation in its window count."""
    root = tmp_path_factory.mktemp("crash") / "course"
    shutil.copytree(built_course, root)
    release = lambda: notebooks.read(notebooks.notebook_path(root, "release", CONV))  # noqa: E731
    reference = notebooks.read(notebooks.notebook_path(REPO, "modules", CONV))
    slip = notebooks.read(notebooks.notebook_path(REPO, "modules", CONV))
    layout = notebooks.cells_by_id(slip)["window_layout"]
    for size, stride, dilation, kernel, count in [("h", "th", "dh", "kh", "oh"), ("w", "tw", "dw", "kw", "ow")]:
        right = f"{count} = ({size} - {dilation} * ({kernel} - 1) - 1) // {stride} + 1"
        assert layout.source.count(right) == 1
        layout.source = layout.source.replace(right, f"{count} = ({size} - ({kernel} - 1) - 1) // {stride} + 1")
    hand_ins = {"full": with_solutions(release(), reference),
                "abort": with_solutions(release(), reference, {"conv2d_backward": "\nimport os\nos.abort()\n"}),
                "no-dilation": with_solutions(release(), slip)}
    folder = tmp_path_factory.mktemp("crash-hand-ins")
    for student, notebook in hand_ins.items():
        notebooks.write(notebook, folder / student / f"{CONV}.ipynb")
    roster = folder / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(f"{s},{s},L,\n" for s in hand_ins))
    grading.import_roster(root, roster)
    grading.collect_folder(root, CONV, folder)
    return root, grading.autograde(root, [CONV], jobs=2, log=lambda message: None)[CONV]


def cell_scores(root, student):
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(CONV, CONV, student)
        return {grade.name: (grade.score, grade.max_score) for grade in notebook.grades}


def feedback(root, student):
    return (root / "feedback" / student / CONV / f"{CONV}.html").read_text()


UNTOUCHED = ["window_layout_visible", "window_layout_hidden", "conv2d_function_visible", "conv2d_function_hidden",
             "max_pool_visible", "max_pool_hidden", "bn_function_visible", "bn_function_hidden"]


def test_a_dead_kernel_costs_only_the_exercise_that_crashed(crash_class):
    root, outcome = crash_class
    full, abort = outcome["full"], outcome["abort"]
    assert full["status"] == "graded" and full["score"] == full["max_score"], full
    assert abort["status"] == "graded" and 0 < abort["score"] < full["score"], abort
    crashed = [n for n in abort["notes"] if "kernel died" in n]
    assert len(crashed) == 1 and re.match(r'the kernel died while cell \d+ \(conv2d_backward, under "Exercise 3',
                                          crashed[0]), abort
    scores = cell_scores(root, "abort")
    assert all(scores[gid][0] == scores[gid][1] > 0 for gid in UNTOUCHED), scores
    assert scores["conv2d_backward_visible"][0] == scores["conv2d_backward_hidden"][0] == 0, scores
    page = feedback(root, "abort")
    assert "KernelDied: the kernel died while cell" in page and "(conv2d_backward, under" in page
    assert "os.abort()" in page  # the learner's own code is shown, not the stub it was graded as


def test_a_layout_past_its_storage_is_an_error_in_the_cells_that_use_it(crash_class):
    root, outcome = crash_class
    slip = outcome["no-dilation"]
    assert slip["status"] == "graded" and not any("kernel died" in n for n in slip["notes"]), slip
    scores = cell_scores(root, "no-dilation")
    assert scores["window_layout_visible"][0] == 0 and scores["conv2d_function_hidden"][0] == 0, scores
    assert all(scores[gid][0] == scores[gid][1] for gid in ["bn_function_visible", "bn_function_hidden"]), scores
    assert "reads outside its input: shape (" in feedback(root, "no-dilation")


def test_feedback_names_each_test_by_its_exercise_and_shows_no_hidden_value(crash_class):
    root, _ = crash_class
    page = feedback(root, "full")
    assert "Test cell</a>" not in page
    assert re.search(r'<a href="#window_layout_hidden">window_layout_hidden: hidden test of Exercise 1 — '
                     r'window_layout</a> \(Score: 2\.0 / 2\.0\)', page), page[:3000]
    executed = notebooks.read(notebooks.notebook_path(root, "autograded/full", CONV))
    shown = [c for c in executed.cells if "BEGIN HIDDEN TESTS" in c.source
             and any(o.output_type == "execute_result" for o in c.outputs)]
    assert shown, "no hidden test cell shows a value: this test checks nothing"
    for cell in shown:  # a value the grader recorded is not shown as an output in the feedback
        anchor = page.index(f'<a name="{notebooks.grade_id(cell)}">')
        following = page[anchor:page.find('<a name="', anchor + 10)]
        assert "Out[" not in following and "output_execute_result" not in following, following[:2000]
