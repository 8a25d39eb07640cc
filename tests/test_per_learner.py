"""Per-learner hidden inputs (`tinytorch_course.build.hidden_inputs`), through the instructor's real route.

A class of module 01 in a term of two variants: two learners with the same correct notebook in
different variants, and two who copy the answers of one of them (a table of her solution's results
on the inputs her run drew, her hidden tests' included), one in her variant and one in the other.
Then a regrade, and a new term.
"""
import json
import os
import shutil
import stat

import numpy as np
import pytest

from tinytorch.testing import FIXED_SEED, HIDDEN_SEED_ENV, hidden_rng
from tinytorch_course import notebooks
from tinytorch_course.build import hidden_inputs
from tinytorch_course.grading import grading, sandbox, verdicts
from tinytorch_course.nbgrader_api import GRADER_KERNEL, api

from conftest import REPO

MODULE = "01_tensor"
COPIED = "storage_index"  # the exercise whose answers are copied
SECRET = "5e" * 32  # this test's own course secret: the learners' variants below are fixed by it
CANDIDATES = [f"learner-{n}" for n in range(12)]


def variant_of(root, student):
    return hidden_inputs.variant(root, MODULE, student)["variant"]


def answer_key(root, variant):
    cache = sandbox.default_cache_dir(root) / "answer-keys"
    return verdicts.reference_records(root, MODULE, cache, GRADER_KERNEL, hidden_inputs.seed(root, MODULE, variant),
                                      hidden_inputs.seed(root, MODULE, 0))


def informative_values(key, gid):
    return [json.dumps(entry["got"]) for entry in key[gid] if entry.get("informative")]


def calls_of(root, function, seed, scratch):
    """`[[repr((args, kwargs)), outcome]]`: every call of `function` while the solved notebook runs
    as graded, with hidden-input seed `seed` (what a learner's notebook computed for its tests)."""
    notebook = notebooks.read(notebooks.notebook_path(root, "modules", MODULE))
    log = scratch / "calls.json"
    index = next(i for i, cell in enumerate(notebook.cells) if notebooks.grade_id(cell) == function)
    import nbformat

    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(
        f"_calls, _solved = [], {function}\n"
        f"def {function}(*args, **kwargs):\n"
        "    try:\n"
        "        out = _solved(*args, **kwargs)\n"
        "    except Exception as error:\n"
        "        _calls.append([repr((args, sorted(kwargs.items()))), ['raise', type(error).__name__, str(error)]])\n"
        "        raise\n"
        "    _calls.append([repr((args, sorted(kwargs.items()))), ['return', repr(out)]])\n"
        "    return out\n"))
    notebook.cells.append(nbformat.v4.new_code_cell(f"import json; open({str(log)!r}, 'w').write(json.dumps(_calls))"))
    verdicts.execute_recording(notebook, notebooks.notebook_path(root, "modules", MODULE).parent,
                               scratch / "records.jsonl", GRADER_KERNEL,
                               extra_env={"NBGRADER_EXECUTION": "autograde", HIDDEN_SEED_ENV: seed},
                               skip_sources=notebooks.skipped_when_graded(notebook))
    return json.loads(log.read_text())


def copier_notebook(root, calls):
    """The solutions notebook with `COPIED` replaced by a lookup in `calls`: no work, only answers."""
    notebook = notebooks.read(notebooks.notebook_path(root, "solutions", MODULE))
    cell = notebooks.cells_by_id(notebook)[COPIED]
    cell.source = (f"#| export\nimport builtins\n_ANSWERS = dict({json.dumps(calls)})\n"
                   f"def {COPIED}(*args, **kwargs):\n"
                   "    outcome = _ANSWERS[repr((args, sorted(kwargs.items())))]  # KeyError: not copied\n"
                   "    if outcome[0] == 'raise':\n"
                   "        raise getattr(builtins, outcome[1])(outcome[2])\n"
                   "    return eval(outcome[1])\n")
    return notebook


def cell_scores(root, student):
    from nbgrader.api import Gradebook

    with Gradebook(api(root).coursedir.db_url) as gradebook:
        notebook = gradebook.find_submission_notebook(MODULE, MODULE, student)
        return {grade.name: grade.score for grade in notebook.grades}


def grade(root, students):
    outcome = grading.autograde(root, MODULE, students, jobs=2, feedback=False, log=lambda message: None)[MODULE]
    return outcome, {student: cell_scores(root, student) for student in students}


@pytest.fixture(scope="module")
def term_class(built_course, tmp_path_factory):
    """The class graded in term 2027-spring (2 variants), then regraded, then the same hand-ins in
    term 2027-fall."""
    root = tmp_path_factory.mktemp("per-learner") / "course"
    shutil.copytree(built_course, root)
    (root / hidden_inputs.SECRET_FILE).write_text(SECRET + "\n")
    hidden_inputs.set_term(root, "2027-spring", variants=2)
    first = CANDIDATES[0]
    other = next(s for s in CANDIDATES if variant_of(root, s) != variant_of(root, first))
    same = next(s for s in CANDIDATES[1:] if s != other and variant_of(root, s) == variant_of(root, first))
    against = next(s for s in CANDIDATES if s not in (first, other, same) and variant_of(root, s) != variant_of(root, first))
    learners = {"ada": first, "bob": other, "copier-same": same, "copier-other": against}
    scratch = tmp_path_factory.mktemp("calls")
    calls = calls_of(root, COPIED, hidden_inputs.seed(root, MODULE, variant_of(root, first)), scratch)
    hand_ins = tmp_path_factory.mktemp("hand-ins")
    solved = notebooks.read(notebooks.notebook_path(root, "solutions", MODULE))
    for role, student in learners.items():
        notebook = copier_notebook(root, calls) if role.startswith("copier") else solved
        notebooks.write(notebook, hand_ins / student / f"{MODULE}.ipynb")
    roster = hand_ins / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(f"{s},{role},Learner,\n" for role, s in learners.items()))
    grading.import_roster(root, roster)
    grading.collect_folder(root, MODULE, hand_ins)
    students = list(learners.values())
    spring = grade(root, students)
    keys = {v: answer_key(root, v) for v in (0, 1)}
    regraded = grade(root, students)
    csv_rows = list(grading.class_grades(root))
    hidden_inputs.set_term(root, "2027-fall", variants=2)
    fall = grade(root, [first])
    fall_key = answer_key(root, variant_of(root, first))
    return {"root": root, "learners": learners, "spring": spring, "regraded": regraded, "keys": keys,
            "fall": fall, "fall_key": fall_key, "csv": csv_rows, "calls": calls}


def test_same_solution_different_variants_different_records_both_full_marks(term_class):
    ada, bob = term_class["learners"]["ada"], term_class["learners"]["bob"]
    outcome, _ = term_class["spring"]
    for student in (ada, bob):
        assert outcome[student]["status"] == "graded" and outcome[student]["score"] == outcome[student]["max_score"] > 0
    assert outcome[ada]["variant"]["variant"] != outcome[bob]["variant"]["variant"]
    keys = term_class["keys"]
    # each learner's records matched the key of their own variant, and those hold other inputs' results
    for gid in (f"{COPIED}_hidden", "elementwise_hidden", "flatten_nested_hidden"):
        assert informative_values(keys[0], gid) and informative_values(keys[0], gid) != informative_values(keys[1], gid), gid
    assert verdicts.layout(keys[0]) == verdicts.layout(keys[1])  # one release run served both


def test_copied_answers_score_only_in_the_variant_they_were_copied_from(term_class):
    learners = term_class["learners"]
    outcome, cells = term_class["spring"]
    same, other = learners["copier-same"], learners["copier-other"]
    assert outcome[same]["score"] == outcome[same]["max_score"]  # the copy works where the inputs are hers
    assert outcome[other]["score"] < outcome[other]["max_score"]
    assert cells[other][f"{COPIED}_hidden"] == 0 and cells[other][f"{COPIED}_visible"] == 0
    assert cells[same][f"{COPIED}_hidden"] > 0


def test_a_regrade_reproduces_every_verdict(term_class):
    (first, first_cells), (again, again_cells) = term_class["spring"], term_class["regraded"]
    assert again_cells == first_cells
    for student, entry in first.items():
        assert {k: again[student][k] for k in ("status", "score", "variant")} == \
               {k: entry[k] for k in ("status", "score", "variant")}
    rows = {row["student_id"]: row for row in term_class["csv"] if row["assignment"] == MODULE}
    for student, entry in again.items():
        assert (rows[student]["term"], rows[student]["variant"]) == ("2027-spring", entry["variant"]["variant"])


def test_a_new_term_changes_every_learner_s_inputs(term_class):
    root, learners = term_class["root"], term_class["learners"]
    fall_seeds = {hidden_inputs.seed(root, MODULE, v) for v in (0, 1)}  # the term is 2027-fall now
    hidden_inputs.set_term(root, "2027-spring", variants=2)
    try:
        assert fall_seeds.isdisjoint({hidden_inputs.seed(root, MODULE, v) for v in (0, 1)})
    finally:
        hidden_inputs.set_term(root, "2027-fall", variants=2)
    outcome, _ = term_class["fall"]
    ada = learners["ada"]
    assert outcome[ada]["variant"]["term"] == "2027-fall" and outcome[ada]["score"] == outcome[ada]["max_score"]
    for key in term_class["keys"].values():
        assert informative_values(term_class["fall_key"], f"{COPIED}_hidden") != informative_values(key, f"{COPIED}_hidden")


# ---------------------------------------------------------------- without grading


def test_hidden_rng_is_fixed_outside_grading_and_the_grader_s_inside(monkeypatch):
    monkeypatch.delenv(HIDDEN_SEED_ENV, raising=False)
    fixed = hidden_rng("a").integers(0, 1 << 30, 4)
    assert np.array_equal(fixed, hidden_rng("a").integers(0, 1 << 30, 4))
    assert not np.array_equal(fixed, hidden_rng("b").integers(0, 1 << 30, 4))
    monkeypatch.setenv(HIDDEN_SEED_ENV, FIXED_SEED)
    assert np.array_equal(fixed, hidden_rng("a").integers(0, 1 << 30, 4))
    monkeypatch.setenv(HIDDEN_SEED_ENV, "0123abcd")
    assert not np.array_equal(fixed, hidden_rng("a").integers(0, 1 << 30, 4))


def test_the_secret_is_made_once_for_its_owner_only(tmp_path):
    made = hidden_inputs.secret(tmp_path)
    assert len(made) == 32 and hidden_inputs.secret(tmp_path) == made
    assert stat.S_IMODE(os.stat(tmp_path / hidden_inputs.SECRET_FILE).st_mode) == 0o600
    assert hidden_inputs.term(tmp_path) == {"term": "", "variants": hidden_inputs.DEFAULT_VARIANTS}
    hidden_inputs.set_term(tmp_path, "t", 3)
    assert {hidden_inputs.variant(tmp_path, MODULE, s)["variant"] for s in CANDIDATES} == {0, 1, 2}
    with pytest.raises(ValueError, match="between 1 and 1000"):
        hidden_inputs.set_term(tmp_path, "t", 0)


def test_the_secret_and_term_are_never_committed_nor_in_the_release():
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert f"/{hidden_inputs.SECRET_FILE}" in ignored and f"/{hidden_inputs.TERM_FILE}" in ignored
    for module_id in notebooks.module_ids(REPO):
        release = notebooks.notebook_path(REPO, "release", module_id).read_text()
        assert HIDDEN_SEED_ENV not in release


@pytest.mark.parametrize("module_id", notebooks.module_ids(REPO))
def test_hidden_tests_draw_from_hidden_rng(module_id):
    """No hidden test draws from a fixed seed (`python -m tinytorch_course.build.hidden_inputs` rewrites
    them, e.g. after a merge), but where it mirrors a framework Generator of the same seed."""
    assert hidden_inputs.rewrite_notebook(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))) == 0


def test_the_rewrite_keeps_equal_seeds_equal_and_mirrors_fixed():
    source = ("x = 1\n### BEGIN HIDDEN TESTS\na = np.random.default_rng(3)\nb = np.random.default_rng(seed=3)\n"
              "c = f(np.random.default_rng(k))\nd = np.random.default_rng(7); g = Generator(7)\n"
              "### END HIDDEN TESTS\ny = np.random.default_rng(3)\n")
    assert hidden_inputs.rewrite_source(source, "t_hidden") == (
        "x = 1\n### BEGIN HIDDEN TESTS\na = hidden_rng(\"t_hidden-3\")\nb = hidden_rng(\"t_hidden-3\")\n"
        "c = f(hidden_rng(f\"t_hidden-{k}\"))\nd = np.random.default_rng(7); g = Generator(7)\n"
        "### END HIDDEN TESTS\ny = np.random.default_rng(3)\n")
