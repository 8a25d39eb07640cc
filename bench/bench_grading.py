"""Grading speed: a class of N learners who each hand in the solution of every module.

    .venv/bin/python bench/bench_grading.py [--learners 50] [--jobs 2] [--serial-learners N] [--no-serial]

Prints, measured in this one process on a fresh copy of the course (all modules): the wall time of
the class graded in parallel and serially (--jobs 1; on the first N learners with
--serial-learners, scaled to the class), the ratio, one learner's whole course, and, per module
and on average, the per-notebook overhead of nbgrader (its Autograde, sandbox and gradebook
merge, and feedback) over executing the same notebook with plain nbclient.
"""
import argparse
import os
from pathlib import Path
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import copy_course  # noqa: E402

from tinytorch_course import notebooks  # noqa: E402
from tinytorch_course.grading import grading  # noqa: E402
from tinytorch_course.build.pipeline import build  # noqa: E402
from tinytorch_course.nbgrader_api import GRADER_KERNEL  # noqa: E402


def make_class(root, learners):
    hand_ins = root.parent / "hand-ins"
    for index in range(learners):
        for module_id in notebooks.module_ids(root):
            folder = hand_ins / f"learner-{index:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(notebooks.notebook_path(root, "solutions", module_id), folder / f"{module_id}.ipynb")
    roster = root.parent / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(
        f"learner-{i:03d},L,{i},\n" for i in range(learners)))
    grading.import_roster(root, roster)
    for module_id in notebooks.module_ids(root):
        grading.collect_folder(root, module_id, hand_ins)


def grade(root, jobs, students=None):
    started = time.perf_counter()
    outcome = grading.autograde(root, student_ids=students, jobs=jobs, log=lambda message: None)
    wall = time.perf_counter() - started
    assert all(e["status"] == "graded" and e["score"] == e["max_score"]
               for by_student in outcome.values() for e in by_student.values()), outcome
    return wall, outcome


def plain_execution(root, repeats=2):
    """Seconds to execute each solution notebook with nbclient alone (kernel start included)."""
    seconds = {}
    for module_id in notebooks.module_ids(root):
        times = []
        for _ in range(repeats):
            notebook = nbformat.read(notebooks.notebook_path(root, "solutions", module_id), 4)
            started = time.perf_counter()
            NotebookClient(notebook, kernel_name=GRADER_KERNEL, allow_errors=True,
                           resources={"metadata": {"path": tempfile.mkdtemp()}}).execute()
            times.append(time.perf_counter() - started)
        seconds[module_id] = min(times)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--serial-learners", type=int, help="grade only this many learners serially")
    parser.add_argument("--no-serial", action="store_true", help="skip the serial run")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    root = Path(tempfile.mkdtemp(prefix="bench-grading-")) / "course"
    root.mkdir()
    copy_course(root)
    build(root, log=lambda message: None)
    make_class(root, args.learners)
    modules = notebooks.module_ids(root)
    count = args.learners * len(modules)
    print(f"{args.learners} learners x {len(modules)} module(s) = {count} notebooks, "
          f"{os.cpu_count()} CPU(s)")

    plain = plain_execution(root)
    one_learner, _ = grade(root, args.jobs, students=["learner-000"])
    print(f"one learner's whole course ({len(modules)} notebooks), {args.jobs} jobs: {one_learner:.1f} s")
    parallel, entries = grade(root, args.jobs)
    print(f"class, {args.jobs} jobs:  {parallel:7.1f} s  ({parallel / count:.2f} s per notebook)")
    if not args.no_serial:
        learners = min(args.serial_learners or args.learners, args.learners)
        serial, entries = grade(root, 1, students=[f"learner-{i:03d}" for i in range(learners)])
        per_notebook = serial / (learners * len(modules))
        print(f"class, 1 job:   {per_notebook * count:7.1f} s  ({per_notebook:.2f} s per notebook"
              + (f"; measured on {learners} learners)" if learners < args.learners else ")"))
        print(f"parallel speed-up: {per_notebook * count / parallel:.2f}x")
    else:
        per_notebook = parallel * args.jobs / count
    for module in modules:
        seconds = statistics.mean(e["seconds"] for e in entries[module].values())
        print(f"  {module}: plain nbclient execution {plain[module]:.2f} s, sandboxed Autograde {seconds:.2f} s")
    execution = statistics.mean(plain[m] for m in modules)
    in_sandbox = statistics.mean(e["seconds"] for by_student in entries.values() for e in by_student.values())
    print(f"per notebook: plain nbclient execution {execution:.2f} s; sandboxed nbgrader Autograde "
          f"{in_sandbox:.2f} s; all in (merge, feedback) {per_notebook:.2f} s")
    print(f"nbgrader's overhead per notebook: {in_sandbox - execution:.2f} s in Autograde, "
          f"{per_notebook - execution:.2f} s all in")
    if args.learners != 50:
        print(f"extrapolated to 50 learners, {args.jobs} jobs: {parallel / args.learners * 50 / 60:.1f} min")
    shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
