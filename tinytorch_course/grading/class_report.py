"""The class report (`./course grade report`): what a class got right and wrong on a module.

It reads the gradebook (each test cell's score, the submission times, the due date) and
`grading-status.json` (for each graded check: `passed`, the catalogued `mistakes` its records match,
the kind of `difference` and a `signature` of its records, equal for equal records), over the
learners whose module was scored (graded or review), and writes `reports/NN_name.html` (readable
without scripts, under the feedback pages' Content-Security-Policy, every learner's string escaped)
and `reports/NN_name.csv`. A test *passes* when it earned all its points. A test's *discrimination*
is the point-biserial correlation between passing it and the learner's total on the module without
that test's points.
"""
import base64
import csv
import datetime
import html
import io
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import grading, learning
from .. import notebooks
from ..build import mistakes
from .autograder import read_status
from .feedback import CSP
from .intake import printable
from ..nbgrader_api import CourseError, api
from .verdicts import test_group

REPORTS = "reports"  # in the course folder (git-ignored: it names learners)
SCORED = ("graded", "review")
MIN_LEARNERS = 10  # the summary names a least discriminating test only with this many scored learners
CSV_FIELDS = ["module", "exercise", "test", "max_score", "learners", "mean_score", "pass_rate", "discrimination"]


class ModuleResults(NamedTuple):
    module: str
    rows: list  # `grading.class_grades` rows of the module: every learner on the roster
    tests: list  # [(grade id, max score)] of its graded cells, in the gradebook's order
    scores: dict  # {student: {grade id: score}} of the scored learners
    checks: dict  # {student: {grade id: check}} of the scored learners, from grading-status.json


def load(root, module, rows=None):
    """The module's `ModuleResults` (`rows`: `grading.class_grades(root)`, read here if None)."""
    from nbgrader.api import Gradebook, MissingEntry

    rows = [r for r in (grading.class_grades(root) if rows is None else rows) if r["assignment"] == module]
    scored = sorted(r["student_id"] for r in rows if r["status"] in SCORED)
    with Gradebook(api(root).coursedir.db_url) as gradebook:
        try:
            assignment = gradebook.find_assignment(module)
        except MissingEntry:
            raise CourseError(f"{module} is not in the gradebook: run ./course build first") from None
        tests = [(cell.name, cell.max_score) for notebook in assignment.notebooks for cell in notebook.grade_cells]
        scores = {}
        for student in scored:
            try:
                submission = gradebook.find_submission(module, student)
            except MissingEntry:  # scored in grading-status.json, not in this gradebook: left out
                continue
            scores[student] = {grade.name: grade.score or 0.0 for notebook in submission.notebooks
                               for grade in notebook.grades}
    status = read_status(root).get(module, {})
    checks = {student: (status.get(student) or {}).get("checks") or {} for student in scores}
    return ModuleResults(module, rows, tests, scores, checks)


def point_biserial(passed, rest):
    """The correlation of 0/1 `passed` with `rest` (Pearson's, which for a 0/1 variable is the
    point-biserial coefficient); None where either does not vary."""
    x, y = np.asarray(passed, dtype=float), np.asarray(rest, dtype=float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def item_statistics(results):
    """One row (`CSV_FIELDS`) per test, per exercise (its tests together: it passes when each of
    them does) and for the whole module (`exercise` and `test` empty), over the scored learners."""
    maximum = dict(results.tests)
    totals = {s: sum(got.get(g, 0.0) for g in maximum) for s, got in results.scores.items()}

    def row(exercise, test, ids):
        got = {s: sum(scores.get(g, 0.0) for g in ids) for s, scores in results.scores.items()}
        passed = [all(scores.get(g, 0.0) >= maximum[g] for g in ids) for scores in results.scores.values()]
        n = len(got)
        whole = len(ids) == len(maximum)
        return {"module": results.module, "exercise": exercise, "test": test,
                "max_score": sum(maximum[g] for g in ids), "learners": n,
                "mean_score": sum(got.values()) / n if n else None, "pass_rate": sum(passed) / n if n else None,
                "discrimination": None if whole else point_biserial(passed, [totals[s] - got[s] for s in got])}

    exercises = {}
    for gid, _ in results.tests:
        exercises.setdefault(test_group(gid), []).append(gid)
    rows = [row("", "", list(maximum))]
    for exercise, ids in exercises.items():
        rows.append(row(exercise, "", ids))
        rows.extend(row(exercise, gid, [gid]) for gid in ids)
    return rows


def mistake_counts(root, module, results=None):
    """`{mistake key: [students]}`: the catalogued mistakes (`"cell:what"`) that the scored
    learners' checks match, each learner once, most frequent first."""
    results = results or load(root, module)
    found = {}
    for student, checks in sorted(results.checks.items()):
        for key in sorted({key for check in checks.values() for key in check.get("mistakes") or []}):
            found.setdefault(key, []).append(student)
    return dict(sorted(found.items(), key=lambda item: (-len(item[1]), item[0])))


def clusters(root, module, results=None):
    """`[(grade id, signature, [students])]`: the scored learners' failed checks that match no
    catalogued mistake, grouped by test and signature of their records, biggest first (work not
    done yet, the stub's error, is no mistake: left out)."""
    results = results or load(root, module)
    found = {}
    for student, checks in sorted(results.checks.items()):
        for gid, check in checks.items():
            if not check.get("passed") and not check.get("mistakes") and check.get("difference") != "unfinished":
                found.setdefault((gid, str(check.get("signature"))), []).append(student)
    return [(gid, signature, students)
            for (gid, signature), students in sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))]


def number(module):
    return module.split("_")[0]


def findings(root):
    """At most three lines for the summary: the most frequent named mistake, the least
    discriminating test (with at least `MIN_LEARNERS` scored learners) and the biggest cluster of
    unknown failures, over every module with scored learners."""
    rows = grading.class_grades(root)
    named, weakest, biggest = None, None, None
    for module in sorted({r["assignment"] for r in rows if r["status"] in SCORED}):
        results = load(root, module, rows)
        see = f"(see ./course grade report {number(module)})"
        counts = mistake_counts(root, module, results)
        if counts:
            key, students = next(iter(counts.items()))
            if named is None or len(students) > named[0]:
                named = (len(students), f"{number(module)}: {len(students)} of {len(results.scores)} learners "
                                        f"made '{key}' {see}")
        if len(results.scores) >= MIN_LEARNERS:
            for item in item_statistics(results):
                r = item["discrimination"]
                if item["test"] and r is not None and (weakest is None or r < weakest[0]):
                    weakest = (r, f"{number(module)}: the least discriminating test is {item['test']} "
                                  f"(r = {r:.2f} over {item['learners']} learners) {see}")
        unknown = clusters(root, module, results)
        if unknown and (biggest is None or len(unknown[0][2]) > biggest[0]):
            gid, _, students = unknown[0]
            biggest = (len(students), f"{number(module)}: {len(students)} learners fail {gid} alike, matching "
                                      f"no known mistake: cluster 1 of ./course grade report {number(module)}")
    return [printable(line, 2000) for _, line in filter(None, [named, weakest, biggest])]


# ---------------------------------------------------------------- the page and the CSV

def _png(figure, alt):
    """`figure` as an `<img>` holding its PNG (drawn with matplotlib's Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def pass_rate_plot(items):
    from matplotlib.figure import Figure

    tests = [item for item in items if item["test"]]
    figure = Figure(figsize=(7, 0.3 * len(tests) + 1))
    axes = figure.add_subplot()
    axes.barh([item["test"] for item in tests][::-1], [100 * item["pass_rate"] for item in tests][::-1])
    axes.set_xlim(0, 100)
    axes.set_xlabel("learners who passed (%)")
    return _png(figure, "pass rate of each test")


def submissions_plot(times, due):
    """Handed-in submissions over time (a step line), and the due date."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 3))
    axes = figure.add_subplot()
    axes.step(times, range(1, len(times) + 1), where="post", label="submissions")
    if due:
        axes.axvline(due, color="red", linestyle="--", label="due")
    axes.set_ylabel("handed in")
    axes.legend()
    figure.autofmt_xdate()
    return _png(figure, "submissions over time against the due date")


def _format(value, digits=2):
    return "" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _table(header, rows):
    """An HTML table; every cell is escaped here (`rows` hold plain strings)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(root, results):
    """The module's report as an HTML page."""
    module, n = results.module, len(results.scores)
    names = {r["student_id"]: " ".join(filter(None, [r["first_name"], r["last_name"]])) for r in results.rows}

    def learners(students):
        return ", ".join(f"{s} ({names[s]})" if names.get(s) else s for s in students)

    items = item_statistics(results)
    says = {f"{m.cell}:{m.what}": m.says or m.what for m in mistakes.catalogue(root, module)}
    named = mistake_counts(root, module, results)
    unknown = clusters(root, module, results)
    handed_in = [r for r in results.rows if r["status"] != "missing"]
    times = sorted(r["timestamp"] for r in handed_in if r["timestamp"])
    due = next((r["duedate"] for r in results.rows if r["duedate"]), None)
    late = sum(1 for t in times if due and t > due)
    parts = [f"<h1>Class report: {html.escape(module)}</h1>",
             f"<p>{len(results.rows)} learners on the roster, {len(handed_in)} handed in, {n} scored (graded or "
             f"review), written {datetime.datetime.now():%Y-%m-%d %H:%M}.</p>",
             "<h2>Tests</h2><p>A test passes when it earned all its points (an exercise: each of its tests). "
             "Discrimination: the point-biserial correlation, over the scored learners, between passing and the "
             "learner's total on the module without those points; near 0 or below, the test does not separate "
             "learners who do well on the module from those who do not; empty when everyone or no one passed. "
             f"With fewer than {MIN_LEARNERS} scored learners it says little.</p>",
             _table(["exercise", "test", "points", "mean", "pass rate", "discrimination"],
                    [[i["exercise"] or "(module)", i["test"], _format(i["max_score"], 1), _format(i["mean_score"]),
                      _format(i["pass_rate"]), _format(i["discrimination"])] for i in items])]
    if n:
        parts.append(pass_rate_plot(items))
    parts += ["<h2>Named mistakes</h2>",
              _table(["learners", "mistake", "what the learner is told", "who"],
                     [[len(s), key, says.get(key, "(no longer in the catalogue)"), learners(s)]
                      for key, s in named.items()]) if named else "<p>No check matched a catalogued mistake.</p>",
              "<h2>Failures matching no known mistake</h2>",
              "<p>Failed checks grouped by test and by the signature of their records. Name one with "
              f"<code>./course grade name-cluster {number(module)} CLUSTER --says \"...\"</code>.</p>",
              _table(["cluster", "test", "difference", "signature", "learners", "who"],
                     [[index, gid, results.checks[s[0]][gid].get("difference") or "", signature, len(s), learners(s)]
                      for index, (gid, signature, s) in enumerate(unknown, 1)]) if unknown else "<p>None.</p>",
              "<h2>Submissions</h2>",
              f"<p>{len(times)} submission times; {late} after the due date ({due or 'none set'}).</p>"]
    if times:
        parts.append(submissions_plot(times, due))
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}")
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f"<title>Class report: {html.escape(module)}</title><style>{style}</style></head>\n"
            f"<body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_report(root, module):
    """`reports/NN_name.html` and `reports/NN_name.csv` (one row per test, exercise and the
    module: `CSV_FIELDS`); returns both paths."""
    results = load(root, module)
    folder = Path(root) / REPORTS
    folder.mkdir(exist_ok=True)
    html_path, csv_path = folder / f"{module}.html", folder / f"{module}.csv"
    html_path.write_text(page(root, results))
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows({k: _format(v, 4) for k, v in item.items()} for item in item_statistics(results))
    return html_path, csv_path


def reported_modules(root):
    """The modules with at least one scored learner."""
    return sorted({r["assignment"] for r in grading.class_grades(root) if r["status"] in SCORED})


# ---------------------------------------------------------------- the catalogue grows

def name_cluster(root, module, cluster, says, what=None):
    """Append to `mistakes/NN_name.py` a `Mistake` for the report's cluster `cluster` (its number,
    or `GRADE_ID:SIGNATURE`): its cell the test's exercise, its `signature` the cluster's, `old` and
    `new` empty for the instructor to write. Returns the entry, as loaded back from the file."""
    found = clusters(root, module)
    chosen = [c for index, c in enumerate(found, 1) if cluster in (str(index), f"{c[0]}:{c[1]}")]
    if not chosen:
        raise CourseError(f"{module} has no cluster {cluster!r} of failures matching no known mistake "
                          f"({len(found)} now: see ./course grade report {number(module)})")
    gid, signature, students = chosen[0]
    source = notebooks.read(notebooks.notebook_path(root, "modules", module))
    cell = notebooks.cells_by_id(source).get(gid)
    exercise = cell and learning.exercise_of(cell, learning.exercise_ids(source))
    if not exercise:  # grading names a mistake of one exercise only
        raise CourseError(f"{gid} is not the test of one exercise of modules/{module} (no solution cell's grade id "
                          "begins its own): write the mistake of the exercise that causes it by hand, with old and new")
    entry = mistakes.Mistake(exercise, what or says, "", "", says=says, signature=(gid, signature))
    known = mistakes.catalogue(root, module)
    if any(f"{m.cell}:{m.what}" == f"{entry.cell}:{entry.what}" or m.signature == entry.signature for m in known):
        raise CourseError(f"mistakes/{module}.py already names {entry.cell}:{entry.what} or the signature "
                          f"{signature} of {gid}")
    path = mistakes.catalogue_path(root, module)
    before = path.read_text() if path.is_file() else (
        f'"""Catalogued mistakes of module {module} (see tinytorch_course/build/mistakes.py)."""\n'
        "from tinytorch_course.build.mistakes import Mistake\n\nMISTAKES = [\n]\n")
    body = before.rstrip()
    if not body.endswith("]"):
        raise CourseError(f"{path} does not end with the MISTAKES list's ']': add this entry by hand: {entry!r}")
    body = body[:-1].rstrip()
    path.parent.mkdir(exist_ok=True)
    path.write_text(body + ("" if body.endswith((",", "[")) else ",") +
                    f"\n    # named by ./course grade name-cluster from {len(students)} learners' failures of {gid}:"
                    "\n    # write old and new (the solution's text, the wrong answer) for tests/test_mutants.py"
                    f"\n    {entry!r},\n]\n")
    try:
        loaded = mistakes.catalogue(root, module)[-1]
    except Exception:
        path.write_text(before)
        raise
    if loaded != entry:
        path.write_text(before)
        raise CourseError(f"{path}: the appended entry did not load back as written; the file is unchanged")
    return loaded
