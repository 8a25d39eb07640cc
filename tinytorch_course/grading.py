"""The instructor's grading steps, each a thin wrapper over nbgrader's own commands and API."""
import csv
import subprocess
import sys
from pathlib import Path

from .nbgrader_api import CourseError, api, check, install_grader_kernel


def nbgrader_command(root, *args):
    """Run `nbgrader ARGS` in the course folder; raise with its output if it fails."""
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise CourseError(f"nbgrader {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


def import_roster(root, roster_csv):
    """Add or update the students listed in a CSV with columns id, first_name, last_name, email."""
    from nbgrader.api import Gradebook

    with open(roster_csv, newline="") as f:
        students = list(csv.DictReader(f))
    with Gradebook(api(root).coursedir.db_url) as gradebook:
        for row in students:
            student_id = row.pop("id")
            gradebook.update_or_create_student(student_id, **{k: v for k, v in row.items() if v})
    return students


def zip_collect(root, module_id):
    """`nbgrader zip_collect`: LMS archives in downloaded/NN/archive -> submitted/<student>/NN/."""
    nbgrader_command(root, "zip_collect", module_id, "--force")


def autograde(root, module_id, student_ids):
    """Autograde each student's submission of `module_id` against the hidden tests."""
    install_grader_kernel()
    grader = api(root)
    for student_id in student_ids:
        check(grader.autograde(module_id, student_id, force=True, create=True),
              f"autograde {module_id} for {student_id}")


def generate_feedback(root, module_id, student_ids):
    """Feedback HTML per student (hidden-test source cleared): feedback/<student>/NN/NN.html."""
    grader = api(root)
    for student_id in student_ids:
        check(grader.generate_feedback(module_id, student_id, force=True),
              f"generate_feedback {module_id} for {student_id}")
    return [Path(root) / "feedback" / s / module_id / f"{module_id}.html" for s in student_ids]


def export_grades(root, csv_path):
    """`nbgrader export`: one row per student and module, written to `csv_path`."""
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
    nbgrader_command(root, "export", f"--to={Path(csv_path).resolve()}")
    return csv_path


def scores(root):
    """`{student id: {module id: (score, max score)}}` from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    table = {}
    with Gradebook(api(root).coursedir.db_url) as gradebook:
        for student in gradebook.students:
            row = table.setdefault(student.id, {})
            for assignment in gradebook.assignments:
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    continue
                row[assignment.name] = (submission.score, submission.max_score)
    return table


def format_scores(table, module_ids):
    """A plain-text grade table: one row per student, one column per module, then the total."""
    header = ["student"] + list(module_ids) + ["total"]
    rows = [header]
    for student_id, row in sorted(table.items()):
        cells, got, possible = [student_id], 0.0, 0.0
        for module_id in module_ids:
            if module_id in row:
                score, maximum = row[module_id]
                cells.append(f"{score:g}/{maximum:g}")
                got, possible = got + score, possible + maximum
            else:
                cells.append("-")
        cells.append(f"{100 * got / possible:.0f}%" if possible else "-")
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
