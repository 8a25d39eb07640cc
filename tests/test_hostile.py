"""Hostile and broken submissions, graded together in one class with two honest learners.

Each learner below hands in one kind of trouble. The whole class is graded in one parallel run;
then each learner's outcome is checked: the score it earned, or a flag (review / failed) with the
reason in the summary. The honest learners' grades, the gradebook, release/ and the other
submissions must come through untouched.
"""
import hashlib
import shutil
import sqlite3

import nbformat
import pytest

from tinytorch_course import grading, notebooks
from tinytorch_course.autograder import Limits

from conftest import REPO

MODULE = notebooks.module_ids(REPO)[0]
LIMITS = Limits(cell_timeout=5, notebook_timeout=30, memory_mb=1536, output_mb=2)


def _solution_cells(notebook):
    return [c for c in notebook.cells if notebooks.is_solution(c)]


def before_first_solution(notebook, code):
    cell = _solution_cells(notebook)[0]
    cell.source = code + "\n" + cell.source
    return notebook


def after_solution(notebook, code, which=0):
    cell = _solution_cells(notebook)[which]
    cell.source = cell.source + "\n" + code
    return notebook


def vandal_code(root):
    targets = [root / "gradebook.db", notebooks.notebook_path(root, "submitted/full", MODULE),
               notebooks.notebook_path(root, "release", MODULE), "../../../gradebook.db"]
    return "\n".join([
        "import os, shutil",
        f"for target in {[str(t) for t in targets]!r}:",
        "    for attack in (lambda: open(target, 'a').write('corrupted'), lambda: os.remove(target),",
        "                   lambda: shutil.rmtree(os.path.dirname(target))):",
        "        try:",
        "            attack()",
        "            print('CHANGED', target)",
        "        except Exception as error:",
        "            print('blocked:', type(error).__name__)",
    ])


SNOOP_CODE = "\n".join([  # reads what it can of the other jobs running beside it
    "import glob, os",
    "jobs = os.getcwd()",
    "while os.path.basename(jobs) != 'jobs':",
    "    jobs = os.path.dirname(jobs)",
    "for path in glob.glob(jobs + '/*/course/submitted/*/*/*.ipynb') + glob.glob(jobs + '/*/course/autograded/*/*/*.ipynb'):",
    "    try:",
    "        print('READ', path, len(open(path).read()))",
    "    except OSError as error:",
    "        print('blocked:', type(error).__name__)",
])


def make_class(root):
    """`{student: files}`: what each learner hands in (a notebook, or bytes per file name)."""
    solution = lambda: notebooks.read(notebooks.notebook_path(root, "solutions", MODULE))  # noqa: E731
    release = lambda: notebooks.read(notebooks.notebook_path(root, "release", MODULE))  # noqa: E731
    name = f"{MODULE}.ipynb"
    edited = release()
    for cell in edited.cells:
        if notebooks.is_graded(cell) and not notebooks.is_solution(cell):
            cell.source = 'print("all tests pass")'
    deleted = solution()
    deleted_id = notebooks.grade_id([c for c in deleted.cells if notebooks.is_graded(c)][-1])
    deleted.cells = [c for c in deleted.cells if notebooks.grade_id(c) != deleted_id]
    kernelspec = solution()
    kernelspec.metadata["kernelspec"] = {"name": "bash", "display_name": "Bash", "language": "bash"}
    patched = after_solution(solution(), "import numpy\n_kept = numpy.allclose\n"
                             "numpy.allclose = lambda *a, **k: True")
    patched = after_solution(patched, "numpy.allclose = _kept", which=-1)  # ...and put it back
    return {
        "full": {name: solution()},
        "blank": {name: release()},
        "loop": {name: before_first_solution(solution(), "while True:\n    pass")},
        "stubborn-loop": {name: before_first_solution(solution(), (
            "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
            "    except BaseException:\n        pass"))},
        "sys-exit": {name: before_first_solution(solution(), "import sys\nsys.exit()")},
        "os-exit": {name: before_first_solution(solution(), "import os\nos._exit(1)")},
        "crash": {name: before_first_solution(solution(), "import ctypes\nctypes.string_at(0)")},
        "memory-bomb": {name: before_first_solution(solution(), (
            "def bomb():\n    hog = []\n    while True:\n        hog.append(bytearray(64 << 20))\n"
            "bomb()"))},
        "flood": {name: before_first_solution(solution(), (
            "for _ in range(300):\n    print('x' * 1_000_000)"))},
        "vandal": {name: before_first_solution(solution(), vandal_code(root))},
        "snoop": {name: before_first_solution(solution(), SNOOP_CODE)},
        "allclose": {name: patched},
        "helper": {name: after_solution(solution(), "def expect_error(*args, **kwargs):\n    return None")},
        "tensor-eq": {name: after_solution(solution(), (
            "import tinytorch.tensor\ntinytorch.tensor.Tensor.__eq__ = lambda self, other: True"))},
        "edit-locked": {name: edited},
        "delete-locked": {name: deleted},
        "kernelspec": {name: kernelspec},
        "own-package": {name: after_solution(solution(), "import tinytorch\nprint('FROM', tinytorch.__file__)"),
                        "tinytorch/__init__.py": b"SHADOWED = True\n",
                        "tinytorch/tensor.py": b"SHADOWED = True\n"},
        "corrupt": {name: b'{"cells": [{"cell_type": "code", "sour'},
        "wrong-name": {"Untitled.ipynb": solution()},
        "no-notebook": {"README.txt": b"I could not finish.\n"},
    }


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def graded(built_course, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile") / "course"
    shutil.copytree(built_course, root)
    hand_ins = tmp_path_factory.mktemp("hand-ins")
    learners = make_class(root)
    for student, files in learners.items():
        for file_name, content in files.items():
            path = hand_ins / student / file_name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                nbformat.write(content, str(path))
    roster = hand_ins / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(
        f"{s},{s},Learner,\n" for s in [*learners, "missing"]))
    grading.import_roster(root, roster)
    grading.collect_folder(root, MODULE, hand_ins)
    guarded = [root / "gradebook.db.before", notebooks.notebook_path(root, "submitted/full", MODULE),
               notebooks.notebook_path(root, "release", MODULE)]
    shutil.copy(root / "gradebook.db", guarded[0])
    digests = {p: digest(p) for p in guarded[1:]}
    outcome = grading.autograde(root, MODULE, jobs=2, limits=LIMITS)[MODULE]
    return root, outcome, digests


def entry(graded, student):
    return graded[1][student]


def maximum(graded):
    return entry(graded, "full")["max_score"]


def test_honest_learners_are_unaffected(graded):
    assert entry(graded, "full")["status"] == "graded" and entry(graded, "full")["score"] == maximum(graded)
    assert entry(graded, "blank")["status"] == "graded" and entry(graded, "blank")["score"] == 0


def test_gradebook_release_and_other_submissions_stay_intact(graded):
    root, outcome, digests = graded
    for path, before in digests.items():
        assert digest(path) == before, path
    with sqlite3.connect(root / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    scores = grading.scores(root)
    assert scores["full"][MODULE] == (maximum(graded), maximum(graded))


def test_vandal_could_change_nothing_and_keeps_what_it_earned(graded):
    root, outcome, _ = graded
    assert outcome["vandal"]["status"] == "graded" and outcome["vandal"]["score"] == maximum(graded)
    executed = notebooks.read(notebooks.notebook_path(root, "autograded/vandal", MODULE))
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert "blocked:" in printed and "CHANGED" not in printed


def test_snoop_reads_no_other_learners_work(graded):
    root, outcome, _ = graded
    assert outcome["snoop"]["status"] == "graded" and outcome["snoop"]["score"] == maximum(graded)
    executed = notebooks.read(notebooks.notebook_path(root, "autograded/snoop", MODULE))
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    read = [line for line in printed.splitlines() if line.startswith("READ")]
    assert read and all("/snoop/" in line for line in read), read


@pytest.mark.parametrize("student", ["loop", "sys-exit", "memory-bomb"])
def test_a_stopped_cell_costs_only_what_depends_on_it(graded, student):
    got = entry(graded, student)
    assert got["status"] == "graded", got
    assert 0 < got["score"] < maximum(graded)


@pytest.mark.parametrize("student, note", [("loop", "stopped at the 5 s cell limit"),
                                           ("sys-exit", "called exit()"),
                                           ("memory-bomb", "ran out of memory")])
def test_the_stopped_cell_is_named(graded, student, note):
    assert any(note in line for line in entry(graded, student)["notes"])


def test_a_loop_that_ignores_interrupts_is_stopped_and_reported(graded):
    got = entry(graded, "stubborn-loop")
    assert got["status"] == "failed" and "ignored the interrupt" in got["reasons"][0], got


@pytest.mark.parametrize("student", ["os-exit", "crash"])
def test_a_dead_kernel_fails_with_its_reason(graded, student):
    got = entry(graded, student)
    assert got["status"] == "failed" and "kernel died" in got["reasons"][0], got


def test_output_flood_is_cut(graded):
    root, outcome, _ = graded
    assert outcome["flood"]["status"] == "graded" and outcome["flood"]["score"] == maximum(graded)
    assert any("output cut" in note for note in outcome["flood"]["notes"])
    assert notebooks.notebook_path(root, "autograded/flood", MODULE).stat().st_size < 5 << 20


@pytest.mark.parametrize("student, reason", [
    ("allclose", "numpy.allclose"),
    ("helper", "redefined 'expect_error'"),
    ("tensor-eq", "tinytorch.tensor.Tensor.__eq__"),
    ("delete-locked", "deleted the locked cell"),
    ("own-package", "ships its own tinytorch"),
])
def test_tampering_is_flagged_for_review(graded, student, reason):
    got = entry(graded, student)
    assert got["status"] == "review" and any(reason in r for r in got["reasons"]), got
    assert f"REVIEW {student}" in grading.summary(graded[0])


def test_edited_locked_cells_are_restored(graded):
    got = entry(graded, "edit-locked")
    assert got["status"] == "graded" and got["score"] == 0
    assert any("edited the locked cell" in note for note in got["notes"])


def test_changed_kernelspec_is_ignored(graded):
    got = entry(graded, "kernelspec")
    assert got["status"] == "graded" and got["score"] == maximum(graded)
    assert any("kernelspec changed" in note for note in got["notes"])


def test_shipped_package_does_not_shadow_the_reference(graded):
    root = graded[0]
    executed = notebooks.read(notebooks.notebook_path(root, "autograded/own-package", MODULE))
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    line = next(line for line in printed.splitlines() if line.startswith("FROM"))
    assert "/reference/tinytorch/" in line and "own-package" not in line
    assert entry(graded, "own-package")["score"] == maximum(graded)


@pytest.mark.parametrize("student, status, reason", [
    ("corrupt", "failed", "not a valid notebook"),
    ("wrong-name", "failed", "wrong file name: found Untitled.ipynb"),
    ("no-notebook", "failed", "holds no notebook"),
    ("missing", "missing", "nothing submitted"),
])
def test_broken_hand_ins_are_reported(graded, student, status, reason):
    got = entry(graded, student)
    assert got["status"] == status and reason in got["reasons"][0], got
    label = {"failed": "FAILED", "missing": "missing"}[status]
    assert f"{label} {student}: " in grading.summary(graded[0])


def test_nothing_is_silently_accepted(graded):
    """Every learner but the honest ones, the vandal and the snoop carries a flag or a note."""
    for student, got in graded[1].items():
        if student not in ("full", "blank", "vandal", "snoop"):
            assert got["status"] != "graded" or got["notes"], (student, got)
