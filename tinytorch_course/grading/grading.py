"""The instructor's grading steps, each a thin wrapper over nbgrader's own commands and API."""
import csv
import datetime
from pathlib import Path
import shutil
import subprocess
import sys

from . import intake
from ..nbgrader_api import CourseError, api, check, load_config, working_directory


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


# One state per (learner, module), the same in the grades CSV, the summary, the LMS exports and the
# README: graded (scored), review (scored, flagged for a person to look at), failed (handed in, not
# scored), missing (nothing handed in), ungraded (handed in since the module's last grading of it).
STATES = ("graded", "review", "failed", "missing", "ungraded")
CSV_FIELDS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
              "raw_score", "late_submission_penalty", "score", "max_score", "status", "reasons", "term",
              "variant"]


def _collected_after(folder, graded_at):
    """Whether the submission in `folder` was collected (its files written) after `graded_at`, the
    local time in seconds a grading run recorded (a second of slack for its rounding)."""
    written = max(path.lstat().st_mtime for path in [folder, *folder.iterdir()])
    return written > datetime.datetime.fromisoformat(graded_at).timestamp() + 1


def state(root, module_id, student_id, entry):
    """`(state, reasons)` of one learner's module from what is in submitted/ and the last grading
    `entry` (None if never graded): a module without a submission is missing whatever an earlier run
    said; one never graded, or collected again since its last grading, is ungraded."""
    folder = Path(root) / "submitted" / student_id / module_id
    if folder.is_symlink() or not folder.is_dir():
        return "missing", ["nothing submitted"]
    if (entry is None or entry["status"] not in STATES or entry["status"] in ("missing", "ungraded")
            or _collected_after(folder, entry["graded_at"])):
        return "ungraded", [f"not graded yet: ./course grade run {module_id}"]
    return entry["status"], entry["reasons"]


def class_grades(root):
    """One row per (module, learner on the roster), in the gradebook's order: nbgrader's export
    columns (the score 0 where nothing is recorded) plus `status` (one of `STATES`), `reasons`
    and the last grading's `notes` (lists), the `term` and `variant` of its hidden inputs
    (`hidden_inputs`), and `lms_user_id` from the roster."""
    from nbgrader.api import Gradebook, MissingEntry

    from .autograder import read_status

    status = read_status(root)
    rows = []
    with Gradebook(api(root).coursedir.db_url) as gradebook:
        for assignment in gradebook.assignments:
            for student in gradebook.students:
                row = {"assignment": assignment.name, "duedate": assignment.duedate or "",
                       "student_id": student.id, "last_name": student.last_name or "",
                       "first_name": student.first_name or "", "email": student.email or "",
                       "lms_user_id": student.lms_user_id or "", "max_score": assignment.max_score,
                       "timestamp": "", "raw_score": 0.0, "late_submission_penalty": 0.0, "score": 0.0}
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    pass
                else:
                    penalty = submission.late_submission_penalty or 0.0
                    row.update(timestamp=submission.timestamp or "", raw_score=submission.score,
                               late_submission_penalty=penalty, score=max(0.0, submission.score - penalty))
                entry = status.get(assignment.name, {}).get(student.id)
                row["status"], row["reasons"] = state(root, assignment.name, student.id, entry)
                row["notes"] = entry["notes"] if entry and row["status"] != "missing" else []
                inputs = (entry or {}).get("variant") if row["status"] != "missing" else None
                row["term"], row["variant"] = (inputs["term"], inputs["variant"]) if inputs else ("", "")
                rows.append(row)
    return rows


def export_grades(root, csv_path):
    """The grades CSV: nbgrader's export columns, plus each row's `status` (see `STATES`),
    `reasons`, and the `term` and `variant` its hidden inputs came from (written with Python's csv module: names with commas or quotes stay in their column)."""
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for row in class_grades(root):
            writer.writerow(dict(row, reasons="; ".join(row["reasons"] + row["notes"])))
    return csv_path


def summary(root):
    """Per module that anyone handed in or that was graded: the roster's learners, how many
    submitted, were graded (graded or review), the mean score of those, then each failure, review,
    missing and ungraded learner with the reasons, and the notes of the last grading; then the
    class report's top three findings (`class_report.findings`), if any."""
    from .autograder import read_status

    graded_modules = set(read_status(root))
    by_module = {}
    for row in class_grades(root):
        by_module.setdefault(row["assignment"], []).append(row)
    lines = []
    for module_id, rows in sorted(by_module.items()):
        if module_id not in graded_modules and all(row["status"] == "missing" for row in rows):
            continue  # not handed out yet
        graded = [row for row in rows if row["status"] in ("graded", "review")]
        submitted = [row for row in rows if row["status"] != "missing"]
        maximum = rows[0]["max_score"]
        mean = f"{sum(r['score'] for r in graded) / len(graded):.1f}/{maximum:g}" if graded and maximum else "-"
        lines.append(f"{module_id}: {len(rows)} learners, {len(submitted)} submitted, "
                     f"{len(graded)} graded, mean {mean}")
        for label, wanted in [("FAILED", "failed"), ("REVIEW", "review"), ("missing", "missing"),
                              ("ungraded", "ungraded")]:
            for row in sorted(rows, key=lambda r: r["student_id"]):
                if row["status"] == wanted:
                    score = f" ({row['score']:g}/{maximum:g})" if wanted == "review" else ""
                    lines.append(intake.printable(f"  {label} {row['student_id']}{score}: "
                                                  + "; ".join(row["reasons"]), 2000))
        for row in sorted(rows, key=lambda r: r["student_id"]):
            for note in row["notes"]:
                lines.append(intake.printable(f"  note {row['student_id']}: {note}", 2000))
    if not lines:
        return "nothing graded yet"
    from .class_report import findings

    found = findings(root)
    return "\n".join(lines + (["findings of the class report:"] + [f"  {line}" for line in found] if found else []))


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
