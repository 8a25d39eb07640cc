"""The instructor's grading steps, each a thin wrapper over nbgrader's own commands and API."""
import csv
from pathlib import Path
import shutil
import subprocess
import sys

from . import intake
from .nbgrader_api import CourseError, api, check, load_config, working_directory


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


def zip_collect(root, module_id, archives=()):
    """nbgrader's zip_collect: LMS archives in downloaded/NN/archive -> submitted/<student>/NN/,
    through the course's `intake` plugins. `archives` are first copied into downloaded/NN/archive/.

    Returns what was not collected, one readable line each (a name that does not follow
    `<student-id>_NN_name.ipynb`, a learner not on the roster, a file in another learner's folder,
    a duplicate of which only the newest counts).
    """
    from nbgrader.apps import ZipCollectApp

    archive_dir = Path(root) / "downloaded" / module_id / "archive"
    archive_dir.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        shutil.copyfile(archive, archive_dir / Path(archive).name)
    app = ZipCollectApp()
    with working_directory(root):
        app.initialize([module_id, "--force", "--log-level=ERROR"])
        app.start()
    for student in {info["student_id"] for info in app.collector_plugin_inst.collected}:
        intake.sanitize(Path(root) / "submitted" / student / module_id)
    return app.collector_plugin_inst.problems


def collect_folder(root, module_id, folder):
    """Copy `folder/<student-id>/` (or `folder/<student-id>/NN_name/`) to submitted/<student>/NN/.

    Everything regular in a learner's folder is copied (no links), so a wrong file name or a
    missing notebook shows up, with its reason, when the submission is graded. Returns
    `(student ids, problems)`.
    """
    from .autograder import class_list

    return intake.collect_folder(root, module_id, folder, set(class_list(root)[0]))


def collect_exchange(root, module_id):
    """nbgrader's collect from its exchange (needs `c.Exchange.root`), through
    `intake.TrustedExchangeCollect`."""
    if "root" not in load_config(root).get("Exchange", {}):
        raise CourseError("nbgrader's exchange is not configured: set c.Exchange.root in "
                          "nbgrader_config.py (or collect with --zip or --folder)")
    check(api(root).collect(module_id, update=True), f"collect {module_id} from the exchange")


def autograde(root, module_ids=None, student_ids=None, jobs=None, **options):
    """Autograde (and write feedback for) the given modules x students, in parallel, sandboxed.

    See `autograder.autograde_class`; returns `{module: {student: outcome}}`.
    """
    from .autograder import autograde_class

    if isinstance(module_ids, str):
        module_ids = [module_ids]
    return autograde_class(root, module_ids, student_ids, jobs=jobs, **options)


def export_grades(root, csv_path):
    """`nbgrader export` to `csv_path`, plus each row's grading `status` and `reasons`.

    status is graded, review (scored but flagged for a person to look at), failed (not scored) or
    missing (nothing submitted); reasons says why.
    """
    from .autograder import read_status

    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
    nbgrader_command(root, "export", f"--to={Path(csv_path).resolve()}")
    status = read_status(root)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = (list(rows[0]) if rows else ["assignment", "student_id"]) + ["status", "reasons"]
    for row in rows:
        entry = status.get(row["assignment"], {}).get(row["student_id"])
        row["status"] = entry["status"] if entry else "not graded"
        row["reasons"] = "; ".join(entry["reasons"] + entry["notes"]) if entry else ""
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return csv_path


def summary(root):
    """Per module: learners, submitted, graded, mean score, then every failure and review with
    its reason (from the last grading of each submission)."""
    from .autograder import read_status

    status = read_status(root)
    lines = []
    for module_id in sorted(status):
        entries = status[module_id]
        graded = {s: e for s, e in entries.items() if e["status"] in ("graded", "review")}
        submitted = [s for s, e in entries.items() if e["status"] != "missing"]
        scores = [e["score"] for e in graded.values() if e["score"] is not None]
        maximum = next((e["max_score"] for e in graded.values() if e["max_score"]), None)
        mean = f"{sum(scores) / len(scores):.1f}/{maximum:g}" if scores and maximum else "-"
        lines.append(f"{module_id}: {len(entries)} learners, {len(submitted)} submitted, "
                     f"{len(graded)} graded, mean {mean}")
        for label, wanted in [("FAILED", "failed"), ("REVIEW", "review"), ("missing", "missing")]:
            for student, entry in sorted(entries.items()):
                if entry["status"] == wanted:
                    score = f" ({entry['score']:g}/{entry['max_score']:g})" if entry["score"] is not None else ""
                    lines.append(intake.printable(f"  {label} {student}{score}: " + "; ".join(entry["reasons"]), 2000))
        for student, entry in sorted(entries.items()):
            for note in entry["notes"]:
                lines.append(intake.printable(f"  note {student}: {note}", 2000))
    return "\n".join(lines) if lines else "nothing graded yet"


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


def formgrader(root, port=8899, token=None):
    """JupyterLab on 127.0.0.1 in the course folder; nbgrader's formgrader is at /formgrader."""
    import secrets

    token = token or secrets.token_hex(16)
    print(f"formgrader: http://127.0.0.1:{port}/formgrader?token={token}  (Ctrl-C stops it)")
    subprocess.run([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
                    f"--port={port}", f"--ServerApp.token={token}", "--allow-root",
                    f"--ServerApp.root_dir={root}"], cwd=root, check=False)
