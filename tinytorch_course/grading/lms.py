"""Grades in the import formats of two LMSs, one column per module, from `grading.class_grades`.

- Canvas (Grades > Import): the columns of Canvas's own gradebook export, `Student` ("Last, First"),
  `ID` (Canvas's user id: the roster's `lms_user_id`, if given), `SIS User ID` (the course's student
  id), `SIS Login ID`, `Section`, then one column per module; a second row, `Points Possible`, gives
  each module's maximum. Canvas matches learners by ID, then SIS User ID, then SIS Login ID.
- Moodle (Grades > Import > CSV file): `First name`, `Last name`, `ID number` (the course's student
  id), `Email address`, then one column per module. On import, map "Email address" to useremail
  (or "ID number" to useridnumber) and each module column to its grade item.

Only scores in state `graded` are exported; every other state (see `grading.STATES`) leaves its
cell empty, so an import never writes a grade that a person still has to look at, or a zero for
work not handed in yet. `export` returns how many cells each state left empty.
"""
import collections
import csv
from pathlib import Path

from .grading import class_grades

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["First name", "Last name", "ID number", "Email address"]


def _table(rows):
    """`(module ids in order, {student id: first row}, {(student, module): row})`."""
    modules = list(dict.fromkeys(row["assignment"] for row in rows))
    learners = {}
    cells = {}
    for row in rows:
        learners.setdefault(row["student_id"], row)
        cells[row["student_id"], row["assignment"]] = row
    return modules, learners, cells


def _score(row):
    return f"{row['score']:g}" if row["status"] == "graded" else ""


def canvas_rows(rows):
    modules, learners, cells = _table(rows)
    maxima = {row["assignment"]: row["max_score"] for row in rows}
    yield CANVAS_COLUMNS + modules
    yield ["Points Possible", "", "", "", ""] + [f"{maxima[m]:g}" for m in modules]
    for student_id, row in learners.items():
        name = ", ".join(part for part in (row["last_name"], row["first_name"]) if part) or student_id
        yield ([name, row["lms_user_id"], student_id, "", ""]
               + [_score(cells[student_id, m]) for m in modules])


def moodle_rows(rows):
    modules, learners, cells = _table(rows)
    yield MOODLE_COLUMNS + modules
    for student_id, row in learners.items():
        yield ([row["first_name"], row["last_name"], student_id, row["email"]]
               + [_score(cells[student_id, m]) for m in modules])


def export(root, lms, out):
    """Write the grades of the course at `root` for `lms` (canvas or moodle) to `out`; returns
    `{state: cells left empty}`."""
    rows = class_grades(root)
    table = FORMATS[lms](rows)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    return dict(collections.Counter(row["status"] for row in rows if row["status"] != "graded"))


FORMATS = {"canvas": canvas_rows, "moodle": moodle_rows}
