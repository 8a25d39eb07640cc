"""Run a notebook as the grader does and score its test cells: nbgrader's rule (a cell that
raised scores 0) and the grader's trusted verdict (its records against the answer key's)."""
import nbformat
from nbgrader.utils import determine_grade

from tinytorch_course import notebooks
from tinytorch_course.grading import verdicts
from tinytorch_course.nbgrader_api import GRADER_KERNEL, install_grader_kernel

from conftest import REPO


def execute(notebook, workdir, timeout=120):
    """Execute a copy of `notebook` in the isolated grading kernel as the grader does (errors allowed,
    cells tagged skip-when-graded not run, NBGRADER_EXECUTION set, so the demos that check
    `being_graded()` do not run), recording its checks; returns `(executed notebook, cell records)`."""
    install_grader_kernel()
    notebook = nbformat.from_dict(notebook)
    records = verdicts.execute_recording(notebook, workdir, workdir / "records.jsonl", GRADER_KERNEL,
                                         timeout=timeout, shutdown_kernel="immediate",
                                         extra_env={"NBGRADER_EXECUTION": "autograde"},
                                         skip_sources=notebooks.skipped_when_graded(notebook))
    return notebook, records


def reference(module_id, cache_dir):
    """The answer key's records of a module (cached in `cache_dir`)."""
    install_grader_kernel()
    return verdicts.reference_records(REPO, module_id, cache_dir, GRADER_KERNEL)


def test_scores(executed, cell_records, answer_key, visible_alone=False):
    """`{grade id: (score, max)}` for every autograded test cell, as the grader scores it; with
    `visible_alone`, visible cells on their own checks, as the learner sees them before grading
    (the grader gives their points only with the exercise's hidden checks: `verdicts.judge`)."""
    judged = verdicts.judge(executed, cell_records, answer_key)
    scores = {}
    for cell in executed.cells:
        if notebooks.is_graded(cell) and not notebooks.is_solution(cell):
            gid = notebooks.grade_id(cell)
            score, maximum = determine_grade(cell)
            alone = visible_alone and notebooks.HIDDEN_MARKERS[0] not in cell.source
            passed = judged[gid].records_passed if alone else judged[gid].passed
            scores[gid] = (score if passed else 0, maximum)
    return scores
