"""The class report, quickly (no notebook runs): a course folder with a roster, a gradebook made with
nbgrader's API and synthetic grading-status.json entries of a class of 12 (one with a hostile id and
name) and one absent learner."""
import csv
import datetime
from html.parser import HTMLParser
import json
import shutil

import pytest

from tinytorch_course import __main__ as cli
from tinytorch_course.build import mistakes
from tinytorch_course.grading import class_report, grading
from tinytorch_course.grading.autograder import STATUS_FILE
from tinytorch_course.grading.feedback import CSP
from tinytorch_course.nbgrader_api import CourseError, api

from conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore:.*not in session")  # nbgrader's add_submission, SQLAlchemy 2

MODULE = "03_autograd"
TESTS = {"unbroadcast_visible": 1, "unbroadcast_hidden": 2, "run_backward_visible": 1, "run_backward_hidden": 2}
HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_NAME = ('<script>alert("name")</script>', "O'Brien & <b>Co</b>")
UNBROADCAST = "unbroadcast:gradient not unbroadcast"
ASSIGNMENT = "run_backward:accumulation by assignment instead of addition"
DUE = datetime.datetime(2027, 3, 1, 12, 0)

# learner: {failed test: (mistake keys, difference, signature)}; every other test earns its points
CLASS = {HOSTILE: {"unbroadcast_visible": ([UNBROADCAST], "values", "u1"),
                   "unbroadcast_hidden": ([UNBROADCAST], "values", "u2")},
         **{s: {"unbroadcast_visible": ([UNBROADCAST], "values", "u1"),
                "unbroadcast_hidden": ([UNBROADCAST], "values", "u2")} for s in ["s01", "s02", "s03"]},
         **{s: {"run_backward_hidden": ([ASSIGNMENT], "values", "r1")} for s in ["s04", "s05"]},
         **{s: {"run_backward_hidden": ([], "values", "sigA")} for s in ["s06", "s07", "s08"]},
         "s09": {"unbroadcast_hidden": ([], "shape", "sigB")},
         "s10": {"unbroadcast_visible": ([], "values", "sigA")},
         "s11": {}}
ABSENT = "s12"


def make_course(folder):
    """A course folder whose gradebook holds module 03 graded for `CLASS` (and ABSENT on the
    roster, with nothing handed in), submitted one hour apart, the last two after the due date."""
    root = folder / "course"
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "mistakes", root / "mistakes")
    (root / "modules" / MODULE).mkdir(parents=True)  # the commands' `NN`, and a cluster's exercise
    shutil.copy(REPO / "modules" / MODULE / f"{MODULE}.ipynb", root / "modules" / MODULE)
    with open(folder / "roster.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "first_name", "last_name", "email"])
        for student in [*CLASS, ABSENT]:
            writer.writerow([student, *(HOSTILE_NAME if student == HOSTILE else (student.upper(), "L")), ""])
    from nbgrader.api import Gradebook

    with Gradebook(api(root).coursedir.db_url) as gradebook:
        gradebook.add_assignment(MODULE, duedate=DUE)
        gradebook.add_notebook(MODULE, MODULE)
        for gid, points in TESTS.items():
            gradebook.add_grade_cell(gid, MODULE, MODULE, max_score=points, cell_type="code")
    grading.import_roster(root, folder / "roster.csv")
    graded_at = (datetime.datetime.now() + datetime.timedelta(hours=1)).isoformat(timespec="seconds")
    status = {}
    with Gradebook(api(root).coursedir.db_url) as gradebook:
        for index, (student, failed) in enumerate(CLASS.items()):
            (root / "submitted" / student / MODULE).mkdir(parents=True)
            gradebook.add_submission(MODULE, student, timestamp=DUE + datetime.timedelta(hours=index - 9))
            for gid, points in TESTS.items():
                gradebook.find_grade(gid, MODULE, MODULE, student).auto_score = 0 if gid in failed else points
            gradebook.db.commit()
            checks = {gid: {"passed": gid not in failed, "mistakes": failed.get(gid, ([],))[0],
                            "difference": failed[gid][1] if gid in failed else None,
                            "signature": failed[gid][2] if gid in failed else "ok"} for gid in TESTS}
            status[student] = {"status": "graded", "reasons": [], "notes": [], "graded_at": graded_at,
                               "score": None, "max_score": None, "checks": checks}
    (root / STATUS_FILE).write_text(json.dumps({MODULE: status}))
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return make_course(tmp_path_factory.mktemp("class"))


@pytest.fixture
def course(built, tmp_path):
    """A copy of `built` (a new gradebook costs nbgrader an alembic run: seconds on a busy machine)."""
    return shutil.copytree(built, tmp_path / "course")


def test_named_mistakes_are_counted_once_per_learner(course):
    assert class_report.mistake_counts(course, MODULE) == {
        UNBROADCAST: [HOSTILE, "s01", "s02", "s03"], ASSIGNMENT: ["s04", "s05"]}


def test_unknown_failures_cluster_by_test_and_signature_biggest_first(course):
    status = json.loads((course / STATUS_FILE).read_text())  # s11 left one exercise's stub: no mistake, no cluster
    status[MODULE]["s11"]["checks"]["run_backward_hidden"].update(passed=False, difference="unfinished", signature="sigA")
    (course / STATUS_FILE).write_text(json.dumps(status))
    assert class_report.clusters(course, MODULE) == [
        ("run_backward_hidden", "sigA", ["s06", "s07", "s08"]),
        ("unbroadcast_hidden", "sigB", ["s09"]),
        ("unbroadcast_visible", "sigA", ["s10"])]


def test_point_biserial_against_a_hand_computed_value():
    # passed [1,1,0,1,0], rest [10,8,3,6,5]: M1 = 8, M0 = 4, p = 0.6, population sd = sqrt(5.84)
    assert class_report.point_biserial([1, 1, 0, 1, 0], [10, 8, 3, 6, 5]) == pytest.approx(
        (8 - 4) * (0.6 * 0.4) ** 0.5 / 5.84 ** 0.5)
    assert class_report.point_biserial([1, 1, 1], [1, 2, 3]) is None  # everyone passed


def test_statistics_per_test_exercise_and_module(course):
    items = {(i["exercise"], i["test"]): i for i in class_report.item_statistics(class_report.load(course, MODULE))}
    hidden = items["run_backward", "run_backward_hidden"]
    assert (hidden["learners"], hidden["max_score"]) == (12, 2)
    assert hidden["mean_score"] == pytest.approx(14 / 12) and hidden["pass_rate"] == pytest.approx(7 / 12)
    # passing: rests (the other three tests) 1,1,1,1,2,3,4; failing (s04-s08): 4 each.
    # M1 = 13/7, M0 = 4, p = 7/12; mean 33/12, E[rest^2] = 113/12
    sd = (113 / 12 - (33 / 12) ** 2) ** 0.5
    assert hidden["discrimination"] == pytest.approx((13 / 7 - 4) / sd * (7 / 12 * 5 / 12) ** 0.5)
    assert hidden["discrimination"] == pytest.approx(-0.7758, abs=1e-4)
    assert items["unbroadcast", ""]["pass_rate"] == pytest.approx(6 / 12)  # both tests passed
    assert items["", ""]["mean_score"] == pytest.approx((12 * 6 - 4 * 3 - 5 * 2 - 2 - 1) / 12)
    assert items["", ""]["discrimination"] is None


class Elements(HTMLParser):
    def __init__(self, text):
        super().__init__()
        self.found = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def test_the_page_escapes_learners_runs_nothing_and_embeds_its_plots(course):
    html_path, csv_path = class_report.write_report(course, MODULE)
    assert (html_path, csv_path) == (course / "reports" / f"{MODULE}.html", course / "reports" / f"{MODULE}.csv")
    text = html_path.read_text()
    elements = Elements(text).found
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}) in elements
    assert {tag for tag, _ in elements} <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p",
                                            "table", "tr", "th", "td", "code", "img"}
    images = [attrs for tag, attrs in elements if tag == "img"]
    assert len(images) == 2 and all(a["src"].startswith("data:image/png;base64,") for a in images)
    assert HOSTILE not in text and "<script" not in text and "<b>" not in text
    assert "&lt;img src=x onerror=alert(1)&gt; (&lt;script&gt;alert(&quot;name&quot;)&lt;/script&gt; " \
           "O&#x27;Brien &amp; &lt;b&gt;Co&lt;/b&gt;)" in text
    assert "12 submission times; 2 after the due date" in text
    assert "gradient not unbroadcast" in text and "name-cluster 03 CLUSTER" in text
    with open(csv_path, newline="") as f:
        rows = {(r["exercise"], r["test"]): r for r in csv.DictReader(f)}
    assert rows["run_backward", "run_backward_hidden"]["pass_rate"] == "0.5833"
    assert rows["run_backward", "run_backward_hidden"]["discrimination"] == "-0.7758"


def test_the_summary_ends_with_three_findings(course):
    lines = grading.summary(course).splitlines()
    assert lines[-4:] == [
        "findings of the class report:",
        f"  03: 4 of 12 learners made '{UNBROADCAST}' (see ./course grade report 03)",
        "  03: the least discriminating test is run_backward_hidden (r = -0.78 over 12 learners) "
        "(see ./course grade report 03)",
        "  03: 3 learners fail run_backward_hidden alike, matching no known mistake: cluster 1 of "
        "./course grade report 03"]


def test_no_findings_without_checks_or_enough_learners(course):
    """Three learners graded by a grader without checks (the others ungraded): the summary as before."""
    status = json.loads((course / STATUS_FILE).read_text())
    status[MODULE] = {s: {k: v for k, v in status[MODULE][s].items() if k != "checks"} for s in ["s01", "s04", "s11"]}
    (course / STATUS_FILE).write_text(json.dumps(status))
    text = grading.summary(course)
    assert "03_autograd: 13 learners, 12 submitted, 3 graded" in text and "findings" not in text
    assert class_report.mistake_counts(course, MODULE) == {} and class_report.clusters(course, MODULE) == []


def test_a_named_cluster_joins_the_catalogue(course):
    before = mistakes.catalogue(course, MODULE)
    says = "your backward pass walks the graph in the wrong order: see Exercise 5"
    entry = class_report.name_cluster(course, MODULE, "1", says)
    assert entry == mistakes.Mistake("run_backward", says, "", "", says=says,
                                     signature=("run_backward_hidden", "sigA"))
    second = class_report.name_cluster(course, MODULE, "unbroadcast_hidden:sigB", "shape lost", what="keepdims")
    assert mistakes.catalogue(course, MODULE) == before + [entry, second]
    assert second.cell == "unbroadcast" and second.signature == ("unbroadcast_hidden", "sigB")
    with pytest.raises(CourseError, match="already names"):
        class_report.name_cluster(course, MODULE, "1", "again")
    with pytest.raises(CourseError, match="no cluster '9'"):
        class_report.name_cluster(course, MODULE, "9", "none")


def test_a_cluster_of_a_test_of_no_single_exercise_is_not_named(course):
    """Grading names a mistake by the exercise whose tests fail; a test that no solution cell's grade
    id begins (one of several exercises, or gone from the notebook) has none to give the entry."""
    status = json.loads((course / STATUS_FILE).read_text())
    status[MODULE]["s09"]["checks"]["autograd_demo_visible"] = {"passed": False, "mistakes": [],
                                                                 "difference": "values", "signature": "sigC"}
    (course / STATUS_FILE).write_text(json.dumps(status))
    before = (course / "mistakes" / f"{MODULE}.py").read_text()
    with pytest.raises(CourseError, match="autograd_demo_visible is not the test of one exercise"):
        class_report.name_cluster(course, MODULE, "autograd_demo_visible:sigC", "a mistake")
    assert (course / "mistakes" / f"{MODULE}.py").read_text() == before


def test_the_commands_write_the_report_and_name_a_cluster(course, monkeypatch, capsys):
    monkeypatch.setattr(cli, "ROOT", course)
    assert cli.main(["grade", "report"]) == 0
    assert capsys.readouterr().out == f"report: {course}/reports/{MODULE}.html, {course}/reports/{MODULE}.csv\n"
    assert cli.main(["grade", "name-cluster", "03", "2", "--says", "keep the broadcast shape"]) == 0
    assert "added unbroadcast:keep the broadcast shape" in capsys.readouterr().out
    assert mistakes.catalogue(course, MODULE)[-1].signature == ("unbroadcast_hidden", "sigB")
    assert cli.main(["grade", "name-cluster", "03", "7", "--says", "none"]) == 1
    assert "error: 03_autograd has no cluster '7'" in capsys.readouterr().err
