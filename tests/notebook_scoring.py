"""Run a notebook as the grader does and score its test cells: nbgrader's rule (a cell that
raised scores 0) and the grader's trusted verdict (its records against the answer key's)."""
import json
import os
from pathlib import Path
import subprocess
import sys

import nbformat
from nbgrader.utils import determine_grade

from tinytorch_course import notebooks, verdicts
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


def with_cell_replacement(notebook, grade_id, old, new):
    """A copy of `notebook` whose cell `grade_id` has `old` replaced by `new` (exactly once)."""
    notebook = nbformat.from_dict(notebook)
    cell = notebooks.cells_by_id(notebook)[grade_id]
    count = cell.source.count(old)
    if count != 1:
        raise ValueError(f"{old!r} occurs {count} times in cell {grade_id}; it must occur once")
    cell.source = cell.source.replace(old, new)
    return notebook


class ForkedCells:
    """A process that has run the first cells of a notebook (`shared`) once, as the grading kernel
    runs them, and runs what follows them in a fork of itself (tests/forked_cells.py): each run then
    costs only its own cells, not a kernel's start and the shared cells again."""

    def __init__(self, shared, workdir, timeout=120):
        self.shared, self.workdir, self.runs = shared, Path(workdir), 0
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).with_name("forked_cells.py")), str(timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=self.workdir,
            env={**os.environ, "NBGRADER_EXECUTION": "autograde"})
        self.shared_errors, self.shared_records = self._run(shared, fork=False)

    def _run(self, cells, fork):
        """`(errors, records)` of the code cells of `cells` (by index; those graded runs skip are not run)."""
        skipped = notebooks.skipped_when_graded(nbformat.v4.new_notebook(cells=cells))
        ran = [i for i, c in enumerate(cells)
               if c.cell_type == "code" and c.source.strip() and c.source not in skipped]
        folder = self.workdir / f"run-{self.runs}"
        self.runs += 1
        folder.mkdir()
        request = {"cells": [verdicts.split_hidden(cells[i].source) for i in ran],
                   "records": str(folder), "fork": fork}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            log = (self.workdir / "stderr.log").read_text()[-3000:]
            raise RuntimeError(f"tests/forked_cells.py ended (exit status {self.process.wait()}):\n{log}")
        errors = dict(zip(ran, json.loads(answer)["errors"]))
        records = {i: verdicts.read_new_records(folder / f"{n}.jsonl", 0)[0] for n, i in enumerate(ran)}
        return errors, records

    def execute(self, notebook):
        """`(executed notebook, cell records)` as `execute` gives them, for `notebook`: the shared cells
        followed by others."""
        count = len(self.shared)
        assert [c.source for c in notebook.cells[:count]] == [c.source for c in self.shared]
        errors, records = self._run(notebook.cells[count:], fork=True)
        errors = {**self.shared_errors, **{count + i: e for i, e in errors.items()}}
        records = {**self.shared_records, **{count + i: r for i, r in records.items()}}
        executed = nbformat.from_dict(notebook)
        for index, cell in enumerate(executed.cells):
            if cell.cell_type == "code":
                error = errors.get(index)
                cell.outputs = ([nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[])]
                                if error else [])
        return executed, records

    def close(self):
        self.process.stdin.close()
        self.process.wait()
