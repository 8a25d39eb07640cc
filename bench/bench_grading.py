"""Grading speed: a class of N learners who each hand in the solution of every module.

    .venv/bin/python bench/bench_grading.py [--learners 50] [--jobs 2] [--serial-learners N] [--no-serial]
    .venv/bin/python bench/bench_grading.py --mistakes [--learners 50] [--jobs 2]

Prints, measured in this one process on a fresh copy of the course (all modules): the wall time of
the class graded in parallel and serially (--jobs 1; on the first N learners with
--serial-learners, scaled to the class), the ratio, one learner's whole course, and, per module
and on average, the per-notebook overhead of nbgrader (its Autograde, sandbox and gradebook
merge, and feedback) over executing the same notebook with plain nbclient.

With --mistakes, a term's first grading as a class hands it in: each notebook is the solution with
0 to 3 catalogued mistakes of different exercises (seeded), graded once with the default term's
variants and a cold cache, so answer keys and mistake learning (`grading/learning.py`) are paid for
inside the measured wall time; it prints that time, the learning's share, and how many of the
injected mistakes the feedback named.
"""
import argparse
import collections
import os
from pathlib import Path
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import nbformat
import numpy as np
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import copy_course  # noqa: E402

from tinytorch_course import notebooks  # noqa: E402
from tinytorch_course.grading import grading  # noqa: E402
from tinytorch_course.build import hidden_inputs, mistakes  # noqa: E402
from tinytorch_course.build.pipeline import build  # noqa: E402
from tinytorch_course.grading import learning, sandbox  # noqa: E402
from tinytorch_course.nbgrader_api import GRADER_KERNEL  # noqa: E402


def with_mistakes(root, module_id, rng):
    """The module's solution notebook with 0 to 3 runnable catalogued mistakes of different exercises,
    and their keys."""
    notebook = notebooks.read(notebooks.notebook_path(root, "solutions", module_id))
    catalogue = [m for m in mistakes.catalogue(root, module_id) if m.runnable]
    wanted, chosen, cells = int(rng.integers(0, 4)), [], set()
    for index in rng.permutation(len(catalogue)):
        mistake = catalogue[index]
        if len(chosen) < wanted and mistake.cell not in cells:
            notebook = learning.with_cell_replacement(notebook, mistake.cell, mistake.old, mistake.new)
            chosen.append(learning.mistake_key(mistake))
            cells.add(mistake.cell)
    return notebook, chosen


def make_class(root, learners, inject=False):
    """Hand in every module for each learner; returns `{module: {student: [injected mistake key]}}`."""
    hand_ins = root.parent / "hand-ins"
    rng, injected = np.random.default_rng(39), {}
    for index in range(learners):
        for module_id in notebooks.module_ids(root):
            folder = hand_ins / f"learner-{index:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            if inject:
                notebook, injected.setdefault(module_id, {})[folder.name] = with_mistakes(root, module_id, rng)
                notebooks.write(notebook, folder / f"{module_id}.ipynb")
            else:
                shutil.copy(notebooks.notebook_path(root, "solutions", module_id), folder / f"{module_id}.ipynb")
    roster = root.parent / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(
        f"learner-{i:03d},L,{i},\n" for i in range(learners)))
    grading.import_roster(root, roster)
    for module_id in notebooks.module_ids(root):
        grading.collect_folder(root, module_id, hand_ins)
    return injected


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


def first_grading_with_mistakes(root, jobs, injected, count):
    """Grade the class once, cold; print the wall time, what was learned, the mistakes named, and which
    of those apart from the notebook's other mistakes (`learning.reaches`, both ways) were not."""
    started = time.perf_counter()
    outcome = grading.autograde(root, jobs=jobs, log=lambda message: None)
    wall = time.perf_counter() - started
    learned = list((sandbox.default_cache_dir(root) / "mistakes").glob("*.json"))
    made = named = apart = apart_named = 0
    missed = collections.Counter()
    for module, by_student in injected.items():
        reach = learning.reaches(learning.depends_on(notebooks.read(notebooks.notebook_path(root, "modules", module))))
        for student, chosen in by_student.items():
            found = {name for check in outcome[module][student].get("checks", {}).values() for name in check["mistakes"]}
            for key in chosen:
                cell, others = key.split(":")[0], [c.split(":")[0] for c in chosen if c != key]
                alone = all(o not in reach[cell] and cell not in reach[o] for o in others)
                made, named = made + 1, named + (key in found)
                apart, apart_named = apart + alone, apart_named + (alone and key in found)
                if alone and key not in found:
                    missed[f"{module} {key}"] += 1
    statuses = collections.Counter(e["status"] for by_student in outcome.values() for e in by_student.values())
    print(f"class with mistakes, first grading of the term ({hidden_inputs.term(root)['variants']} variants, cold "
          f"cache), {jobs} jobs: {wall:.1f} s = {wall / 60:.1f} min ({wall / count:.2f} s per notebook); "
          f"statuses {dict(statuses)}")
    print(f"  {len(learned)} (module, exercise, variant) entries learned; {named} of {made} injected mistakes named; "
          f"of the {apart} apart from the notebook's other mistakes, {apart_named} named")
    for key, times in missed.most_common():
        print(f"  not named, though apart: {key} ({times}x)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--serial-learners", type=int, help="grade only this many learners serially")
    parser.add_argument("--no-serial", action="store_true", help="skip the serial run")
    parser.add_argument("--mistakes", action="store_true", help="a term's first grading, with catalogued mistakes")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    os.environ.pop("TINYTORCH_GRADING_CACHE", None)  # the fresh course's own, empty cache
    root = Path(tempfile.mkdtemp(prefix="bench-grading-")) / "course"
    root.mkdir()
    copy_course(root)
    build(root, log=lambda message: None)
    injected = make_class(root, args.learners, inject=args.mistakes)
    modules = notebooks.module_ids(root)
    count = args.learners * len(modules)
    print(f"{args.learners} learners x {len(modules)} module(s) = {count} notebooks, "
          f"{os.cpu_count()} CPU(s)")
    if args.mistakes:
        first_grading_with_mistakes(root, args.jobs, injected, count)
        shutil.rmtree(root.parent, ignore_errors=True)
        return

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
