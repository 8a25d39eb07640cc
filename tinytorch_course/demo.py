"""`demo`: build the course, then grade a sample class of three learners and print the grades
(and `build_course`, what `./course build` runs).

The sample class is graded in a course folder of its own (`artifacts/demo/`, a copy of the course
files), so the demo never touches the real class: its gradebook, submissions, grades or committed files.
"""
import csv
import math
import shutil
import zipfile
from pathlib import Path

from . import notebooks
from .build import hidden_inputs
from .grading import grading, learning, sandbox
from .build.pipeline import build
from .nbgrader_api import api, check

SAMPLE_CLASS = {  # student id -> (first name, what the learner hands in)
    "demo-full": ("Ada", "the reference solution"),
    "demo-blank": ("Blaise", "the untouched release notebook"),
    "demo-partial": ("Grace", "the first half of the exercises solved"),
}


DEMO_FOLDER = Path("artifacts") / "demo"  # in the course folder (git ignores artifacts/)
# What a course build reads and writes: a copy of these is a course of its own (nbgrader_config.py
# puts the course root and the gradebook beside itself).
COURSE_FILES = ["modules", "mistakes", "tinytorch", "release", "solutions", "nbgrader_config.py", "settings.ini"]
# Kept from an earlier demo: answer keys and reference packages (named by digest: safe to reuse), and
# the demo's own grading secret and term (`hidden_inputs`), so that its answer keys are made once.
KEPT = {".grading-cache", hidden_inputs.SECRET_FILE, hidden_inputs.TERM_FILE}
DEMO_VARIANTS = 1  # one answer key per module keeps the demo short (a real class: ./course grade term)


def copy_course(root, destination):
    """Copy the course files of `root` into `destination` (no gradebook, submissions or grades)."""
    for name in COURSE_FILES:
        source = Path(root) / name
        if source.is_dir():
            shutil.copytree(source, Path(destination) / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, Path(destination) / name)
    return Path(destination)


def fresh_demo_course(root):
    """`root/artifacts/demo/`, emptied of an earlier demo (but its grading cache, secret and term),
    filled with a copy of the course files, and every module in its own gradebook (nbgrader's generate_assignment)."""
    folder = Path(root) / DEMO_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.iterdir():
        if path.name in KEPT:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    copy_course(root, folder)
    if not (folder / hidden_inputs.TERM_FILE).is_file():
        hidden_inputs.set_term(folder, "demo", DEMO_VARIANTS)
    grader = api(folder)
    for module_id in notebooks.module_ids(folder):
        check(grader.generate_assignment(module_id, force=True, create=True), f"generate_assignment {module_id}")
    return folder


def partial_submission(root, module_id):
    """The release notebook with the first half of its solution cells filled in."""
    release = notebooks.read(notebooks.notebook_path(root, "release", module_id))
    sources = notebooks.cells_by_id(notebooks.read(notebooks.notebook_path(root, "modules", module_id)))
    solution_cells = [c for c in release.cells if notebooks.is_solution(c)]
    for cell in solution_cells[: math.ceil(len(solution_cells) / 2)]:
        cell.source = notebooks.without_markers(sources[notebooks.grade_id(cell)].source)
    return release


def sample_submission(root, module_id, student_id):
    if student_id == "demo-full":
        return notebooks.read(notebooks.notebook_path(root, "solutions", module_id))
    if student_id == "demo-blank":
        return notebooks.read(notebooks.notebook_path(root, "release", module_id))
    return partial_submission(root, module_id)


def write_lms_archive(root, module_id):
    """The zip an LMS hands out: `downloaded/NN/archive/sample-class.zip` of `<id>_NN.ipynb` files."""
    import nbformat

    archive = Path(root) / "downloaded" / module_id / "archive" / "sample-class.zip"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w") as z:
        for student_id in SAMPLE_CLASS:
            notebook = sample_submission(root, module_id, student_id)
            z.writestr(f"submissions/{student_id}_{module_id}.ipynb", nbformat.writes(notebook))
    return archive


def write_roster(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "first_name", "last_name", "email"])
        for student_id, (first_name, _) in SAMPLE_CLASS.items():
            writer.writerow([student_id, first_name, "Demo", f"{student_id}@example.invalid"])
    return path


def build_course(root, module_ids=None, log=print):
    """`./course build`: the build job, then the kit's file of what each catalogued mistake shows in the
    visible tests (`learning.write_kit_file`: grading's code, which the build job may not import)."""
    build(root, module_ids, log=log)
    learning.write_kit_file(root, sandbox.default_cache_dir(root) / "mistakes", log)


def demo(root, rebuild=True, jobs=None, log=print):
    """Build, then in a fresh demo course (`fresh_demo_course`) collect the sample class's LMS zip,
    autograde, write feedback and grades, and print them. Returns the demo course's folder."""
    if rebuild:
        build_course(root, log=log)
    root = fresh_demo_course(Path(root).resolve())
    artifacts = root / "artifacts"
    log(f"grading the sample class in its own course folder: {root}")
    grading.import_roster(root, write_roster(artifacts / "sample-roster.csv"))
    students = list(SAMPLE_CLASS)
    module_ids = notebooks.module_ids(root)
    for module_id in module_ids:
        write_lms_archive(root, module_id)
        grading.zip_collect(root, module_id)
    grading.autograde(root, module_ids, students, jobs=jobs, log=log)
    grades_csv = grading.export_grades(root, artifacts / "grades.csv")
    log("")
    for student_id, (name, hands_in) in SAMPLE_CLASS.items():
        log(f"  {student_id:13} {name} hands in {hands_in}")
    log("")
    log(grading.format_scores(grading.scores(root), module_ids))
    log("")
    log(grading.summary(root))
    log(f"\nfeedback: {root / 'feedback'}/<student>/<module>/<module>.html")
    log(f"grades:   {grades_csv}")
    return root
