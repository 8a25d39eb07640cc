"""The instructor's route on a copy of the course: the sample class, regrading, summary, CSV,
the collect routes and the formgrader."""
import csv
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile

import nbformat
import pytest

from tinytorch_course import demo, notebooks
from tinytorch_course.build import hidden_inputs
from tinytorch_course.grading import grading
from tinytorch_course.nbgrader_api import CourseError

from conftest import REPO

MODULES = notebooks.module_ids(REPO)
pytestmark = pytest.mark.xdist_group("grading")  # one worker grades the sample class, once (--dist loadgroup)


def test_the_grading_tests_share_one_worker(request):
    """The classes below are graded once only if xdist keeps this module on one worker (pytest 9.2
    ignores the group suffix that pytest-xdist 3.8 writes: each worker then graded its own copy)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@grading"), request.node.nodeid


# Session scope: a worker that runs this module's tests between other modules' would otherwise grade
# the class again each time it comes back to them.
@pytest.fixture(scope="session")
def demo_run(built_course, tmp_path_factory):
    """`(course, its files' bytes before the demo, the demo's own course folder)`."""
    root = tmp_path_factory.mktemp("grading") / "course"
    shutil.copytree(built_course, root)
    before = course_files(root)
    earlier = root / demo.DEMO_FOLDER  # what an earlier demo left: only its grading cache, secret and term stay
    (earlier / "submitted" / "earlier-learner").mkdir(parents=True)
    for name in [hidden_inputs.SECRET_FILE, hidden_inputs.TERM_FILE]:  # the session's: its answer keys
        shutil.copy(root / name, earlier / name)
    (earlier / "grading-status.json").write_text("{}")
    (earlier / ".grading-cache").mkdir()
    (earlier / ".grading-cache" / "kept.json").write_text("[]")
    folder = demo.demo(root, rebuild=False, jobs=2, log=lambda message: None)
    return root, before, folder


@pytest.fixture(scope="session")
def sample_class(demo_run):
    return demo_run[2]


def course_files(root):
    return {p.relative_to(root): p.read_bytes() for name in demo.COURSE_FILES + ["gradebook.db"]
            for p in ([root / name] if (root / name).is_file() else sorted((root / name).rglob("*")))
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_demo_grades_in_a_course_folder_of_its_own(demo_run):
    """The sample class never reaches the real course: its gradebook, submissions, grades and
    course files are as before, and the demo's folder holds the sample class alone."""
    root, before, folder = demo_run
    assert folder == root / "artifacts" / "demo"
    assert course_files(root) == before
    for state in ["submitted", "autograded", "feedback", "downloaded", "grading-status.json",
                  "artifacts/grades.csv"]:
        assert not (root / state).exists(), state
    assert set(grading.scores(root)) == set()  # the real gradebook has no learner
    assert set(grading.scores(folder)) == set(demo.SAMPLE_CLASS)
    assert sorted(p.name for p in (folder / "submitted").iterdir()) == sorted(demo.SAMPLE_CLASS)
    assert (folder / ".grading-cache" / "kept.json").read_text() == "[]"


def test_sample_class_scores_full_zero_and_partial(sample_class):
    table = grading.scores(sample_class)
    for module_id in MODULES:
        full, maximum = table["demo-full"][module_id]
        assert maximum > 0 and full == maximum
        assert table["demo-blank"][module_id] == (0, maximum)
        assert 0 < table["demo-partial"][module_id][0] < maximum


def test_the_full_marks_notebooks_ran_without_errors_and_skipped_only_tagged_cells(sample_class):
    """Cells tagged skip-when-graded (pictures, timings) are not run while graded, and no other cell
    needed them: the reference solution's graded notebooks hold no error."""
    for module_id in MODULES:
        graded = notebooks.read(sample_class / "autograded" / "demo-full" / module_id / f"{module_id}.ipynb")
        assert notebooks.error_outputs(graded) == [], module_id
        skipped = notebooks.skipped_when_graded(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id)))
        for cell in graded.cells:
            if cell.cell_type == "code":
                assert (cell.execution_count is None) == (cell.source in skipped), (module_id, cell.source[:80])


def test_summary_counts_every_module(sample_class):
    text = grading.summary(sample_class)
    for module_id in MODULES:
        assert f"{module_id}: 3 learners, 3 submitted, 3 graded, mean " in text
    assert "FAILED" not in text and "REVIEW" not in text


def test_grades_csv_has_a_status_per_row(sample_class):
    with open(sample_class / "artifacts" / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * len(MODULES)
    assert {row["status"] for row in rows} == {"graded"}


def test_feedback_for_every_learner_without_hidden_tests(sample_class):
    for module_id in MODULES:
        for student in demo.SAMPLE_CLASS:
            html = (sample_class / "feedback" / student / module_id / f"{module_id}.html").read_text()
            assert "BEGIN HIDDEN TESTS" not in html


def test_regrading_one_learner_leaves_the_others_alone(sample_class, tmp_path):
    sample_class = shutil.copytree(sample_class, tmp_path / "course")  # the shared class stays as graded
    module_id = MODULES[0]
    before = json.loads((sample_class / "grading-status.json").read_text())[module_id]
    improved = notebooks.notebook_path(sample_class, "submitted/demo-partial", module_id)
    shutil.copy(notebooks.notebook_path(sample_class, "solutions", module_id), improved)
    outcome = grading.autograde(sample_class, [module_id], ["demo-partial"], jobs=1,
                                log=lambda message: None)
    assert list(outcome[module_id]) == ["demo-partial"]
    table = grading.scores(sample_class)
    assert table["demo-partial"][module_id][0] == table["demo-partial"][module_id][1]
    after = json.loads((sample_class / "grading-status.json").read_text())[module_id]
    assert after["demo-blank"] == before["demo-blank"] and after["demo-full"] == before["demo-full"]
    assert after["demo-partial"]["graded_at"] >= before["demo-partial"]["graded_at"]


def test_zip_collect_reports_badly_named_files(sample_class, tmp_path):
    # a copy: collecting again would make the shared class's submissions newer than their grading
    sample_class = shutil.copytree(sample_class, tmp_path / "course")
    module_id = MODULES[0]
    archive = tmp_path / "late.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("Untitled.ipynb", "{}")
    problems = grading.zip_collect(sample_class, module_id, [archive])
    assert any("Untitled.ipynb" in problem and "<student-id>_NN_name.ipynb" in problem for problem in problems)


def test_exchange_needs_configuring(sample_class):
    with pytest.raises(CourseError, match="Exchange.root"):
        grading.collect_exchange(sample_class, MODULES[0])


def test_collect_from_the_exchange(built_course, tmp_path):
    """A learner fetches and submits through nbgrader's exchange; `course grade collect NN
    --exchange` (run in a course with c.Exchange.root set) collects it, and it grades."""
    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    shutil.copytree(REPO / "tinytorch_course", root / "tinytorch_course",
                    ignore=shutil.ignore_patterns("__pycache__"))  # so the command's ROOT is the copy
    exchange = tmp_path / "exchange"
    with open(root / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    module_id = MODULES[0]
    nbgrader = [sys.executable, "-m", "nbgrader"]
    learner_flags = ["--course=tinytorch", f"--Exchange.root={exchange}"]
    learner = tmp_path / "learner"
    learner.mkdir()
    for command, cwd in [([*nbgrader, "release_assignment", module_id], root),
                         ([*nbgrader, "fetch_assignment", module_id, *learner_flags], learner)]:
        subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    shutil.copy(notebooks.notebook_path(root, "solutions", module_id), learner / module_id / f"{module_id}.ipynb")
    subprocess.run([*nbgrader, "submit", module_id, "--student=exchange-learner", *learner_flags],
                   cwd=learner, check=True, capture_output=True)
    collected = subprocess.run([sys.executable, "-m", "tinytorch_course", "grade", "collect",
                                module_id[:2], "--exchange"], cwd=root, capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    submitted = notebooks.notebook_path(root, "submitted/exchange-learner", module_id)
    assert submitted.is_file() and (submitted.parent / "timestamp.txt").is_file()
    outcome = grading.autograde(root, [module_id], ["exchange-learner"], jobs=1, feedback=False,
                                log=lambda message: None)[module_id]["exchange-learner"]
    assert outcome["status"] == "graded" and outcome["score"] == outcome["max_score"], outcome


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_formgrader_lists_the_submissions(sample_class):
    port, token = free_port(), "test-token"
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--ServerApp.token={token}", "--allow-root", f"--ServerApp.root_dir={sample_class}"],
        cwd=sample_class, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/formgrader/api/submissions/{MODULES[0]}?token={token}"
        for _ in range(60):
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    submissions = json.loads(response.read())
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the formgrader did not answer")
        assert {s["student"] for s in submissions} >= set(demo.SAMPLE_CLASS)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize("module_id", MODULES[1:])
def test_each_module_is_graded_against_the_reference_package(built_course, tmp_path, module_id):
    """A learner who left every earlier module blank still gets full marks on this one."""
    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    hand_in = tmp_path / "hand-in" / "learner"
    hand_in.mkdir(parents=True)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nlearner,L,L,\n")
    grading.import_roster(root, roster)
    for earlier in MODULES[:MODULES.index(module_id) + 1]:
        folder = "solutions" if earlier == module_id else "release"
        shutil.copy(notebooks.notebook_path(root, folder, earlier), hand_in / f"{earlier}.ipynb")
        grading.collect_folder(root, earlier, tmp_path / "hand-in")
    outcome = grading.autograde(root, [module_id], ["learner"], jobs=1, feedback=False,
                                log=lambda message: None)[module_id]["learner"]
    assert outcome["status"] == "graded" and outcome["score"] == outcome["max_score"], outcome


def test_nbgrader_s_own_autograde_runs_sandboxed_and_judges(built_course, tmp_path):
    """`nbgrader autograde` (what the formgrader's button runs) in the course folder: the
    submission runs in the sandbox, and hiding its errors from nbgrader earns nothing and
    flags it in the gradebook. No answer key is cached yet: it is made inside nbgrader's Autograde,
    as on a fresh course."""
    from nbgrader.api import Gradebook

    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    module_id = MODULES[0]
    hook = notebooks.read(notebooks.notebook_path(root, "release", module_id))
    cell = next(c for c in hook.cells if notebooks.is_solution(c))
    cell.source = ("import os\nprint('CWD', os.getcwd(), os.getuid())\n_ip = get_ipython()\n"
                   "_ip.set_custom_exc((BaseException,), lambda *a, **k: None)\n"
                   "def _forget(result): result.error_in_exec = None\n"
                   "_ip.events.register('post_run_cell', _forget)\n") + cell.source
    target = notebooks.notebook_path(root, "submitted/hooker", module_id)
    target.parent.mkdir(parents=True)
    nbformat.write(hook, str(target))
    result = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", module_id, "--student=hooker",
                             "--create"], cwd=root, capture_output=True, text=True,
                            env={**os.environ, "TINYTORCH_GRADING_CACHE": str(tmp_path / "no-cache-yet")})
    assert result.returncode == 0, result.stdout + result.stderr
    executed = notebooks.read(notebooks.notebook_path(root, "autograded/hooker", module_id))
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert "CWD /grader/work" in printed
    if os.geteuid() == 0:  # run as a user of its own
        assert "CWD /grader/work 0\n" not in printed
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(module_id, "hooker")
        assert submission.score == 0
        assert all(notebook.flagged for notebook in submission.notebooks)


@pytest.fixture
def mixed_class(sample_class, tmp_path, capsys):
    """A copy of the graded sample class with a learner in every state: two more learners on the
    roster (one hands in module 01 after the run, one nothing), demo-blank's module 02 withdrawn
    after it was graded, and demo-partial's module 01 handed in again under a wrong name and
    regraded (it fails before running; the gradebook keeps the earlier score), and demo-full's module
    03 collected again after its grading."""
    root = tmp_path / "course"
    shutil.copytree(sample_class, root)
    first, second = MODULES[:2]
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email,lms_user_id\n"
                      'late-learner,Lin,"Late, Jr.",late@example.invalid,4711\n'
                      "absent-learner,Abe,Sent,absent@example.invalid,\n")
    grading.import_roster(root, roster)
    late = notebooks.notebook_path(root, "submitted/late-learner", first)
    late.parent.mkdir(parents=True)
    shutil.copy(notebooks.notebook_path(root, "solutions", first), late)
    shutil.rmtree(root / "submitted" / "demo-blank" / second)
    partial = notebooks.notebook_path(root, "submitted/demo-partial", first)
    partial.rename(partial.with_name("Untitled.ipynb"))
    capsys.readouterr()
    grading.autograde(root, [first], ["demo-partial"], jobs=1, log=lambda message: None)
    graded_at = json.loads((root / "grading-status.json").read_text())[MODULES[2]]["demo-full"]["graded_at"]
    again = notebooks.notebook_path(root, "submitted/demo-full", MODULES[2])
    collected = datetime.datetime.fromisoformat(graded_at).timestamp() + 60
    os.utime(again, (collected, collected))
    return root, capsys.readouterr().err


EXPECTED_STATES = {  # (module index, learner) -> state in the mixed class; every other module: graded or missing
    (0, "demo-full"): "graded", (0, "demo-blank"): "graded", (0, "demo-partial"): "failed",
    (0, "late-learner"): "ungraded", (0, "absent-learner"): "missing",
    (1, "demo-full"): "graded", (1, "demo-blank"): "missing", (1, "demo-partial"): "graded",
    (1, "late-learner"): "missing", (1, "absent-learner"): "missing", (2, "demo-full"): "ungraded",
}


def expected_state(module_id, student):
    index = MODULES.index(module_id)
    if (index, student) in EXPECTED_STATES:
        return EXPECTED_STATES[index, student]
    return "graded" if student in demo.SAMPLE_CLASS else "missing"


def test_a_failure_is_printed_as_it_happens(mixed_class):
    _, printed = mixed_class
    assert f"FAILED {MODULES[0]} demo-partial: wrong file name: found Untitled.ipynb" in printed


def test_one_state_per_learner_and_module_in_csv_and_summary(mixed_class):
    root, _ = mixed_class
    grading.export_grades(root, root / "grades.csv")
    with open(root / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == grading.CSV_FIELDS
    assert {(r["assignment"], r["student_id"]): r["status"] for r in rows} == {
        (m, s): expected_state(m, s) for m in MODULES for s in [*demo.SAMPLE_CLASS, "late-learner", "absent-learner"]}
    late = next(r for r in rows if r["student_id"] == "late-learner")
    assert late["last_name"] == "Late, Jr."  # a comma stays in its column
    text = grading.summary(root)
    first, second = MODULES[:2]
    assert f"{first}: 5 learners, 4 submitted, 2 graded, mean " in text
    assert f"{second}: 5 learners, 2 submitted, 2 graded, mean " in text
    assert f"{MODULES[2]}: 5 learners, 3 submitted, 2 graded, mean " in text
    for module_id in MODULES[3:]:
        assert f"{module_id}: 5 learners, 3 submitted, 3 graded, mean " in text
    assert "  FAILED demo-partial: wrong file name" in text
    assert f"  ungraded late-learner: not graded yet: ./course grade run {first}" in text
    assert f"  ungraded demo-full: not graded yet: ./course grade run {MODULES[2]}" in text
    assert "  missing absent-learner: nothing submitted" in text and "  missing demo-blank: nothing submitted" in text


@pytest.mark.parametrize("page", ["README.md", "docs/grading.md"])
def test_the_docs_name_each_state_once(page):
    """The README's first week and the grading page each define every state once, in bold."""
    text = (REPO / page).read_text()
    for name in grading.STATES:
        assert text.count(f"**{name}**") == 1, (page, name)


def gradebook_scores(root):
    return {(r["student_id"], r["assignment"]): r for r in grading.class_grades(root)}


def test_canvas_export_has_canvas_s_columns_and_only_graded_scores(mixed_class):
    from tinytorch_course.grading import lms

    root, _ = mixed_class
    lms.export(root, "canvas", root / "canvas.csv")
    with open(root / "canvas.csv", newline="", encoding="utf-8") as f:
        header, points, *learners = list(csv.reader(f))
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + MODULES
    rows = gradebook_scores(root)
    assert points == ["Points Possible", "", "", "", ""] + [f"{rows['demo-full', m]['max_score']:g}" for m in MODULES]
    by_id = {row[2]: row for row in learners}
    assert sorted(by_id) == sorted([*demo.SAMPLE_CLASS, "late-learner", "absent-learner"])
    assert by_id["demo-full"][:2] == ["Demo, Ada", ""] and by_id["late-learner"][:2] == ["Late, Jr., Lin", "4711"]
    for student, row in by_id.items():
        for module_id, cell in zip(MODULES, row[5:]):
            graded = expected_state(module_id, student) == "graded"
            assert cell == (f"{rows[student, module_id]['score']:g}" if graded else ""), (student, module_id)
    assert float(by_id["demo-full"][5]) == float(points[5]) > 0


def test_moodle_export_has_an_identifier_column_and_one_column_per_module(mixed_class):
    root, _ = mixed_class
    shutil.copytree(REPO / "tinytorch_course", root / "tinytorch_course",
                    ignore=shutil.ignore_patterns("__pycache__"))  # so the command's ROOT is the copy
    result = subprocess.run([sys.executable, "-m", "tinytorch_course", "grade", "export", "--lms", "moodle",
                             "--out", str(root / "moodle.csv")], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "left empty (not graded): 1 failed, 16 missing, 2 ungraded" in result.stdout
    with open(root / "moodle.csv", newline="", encoding="utf-8") as f:
        header, *learners = list(csv.reader(f))
    assert header == ["First name", "Last name", "ID number", "Email address"] + MODULES
    rows = gradebook_scores(root)
    by_id = {row[2]: row for row in learners}
    assert by_id["demo-full"][:4] == ["Ada", "Demo", "demo-full", "demo-full@example.invalid"]
    assert by_id["demo-full"][4:] == [f"{rows['demo-full', m]['max_score']:g}" if m != MODULES[2] else ""
                                      for m in MODULES]
    assert by_id["demo-partial"][4] == "" and by_id["absent-learner"][4:] == [""] * len(MODULES)
