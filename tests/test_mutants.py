"""Tests have teeth: every plausible wrong answer in mistakes/ (the catalogue) loses points on a hidden test,
and on a visible test too (so the learner finds out before grading) unless it is tagged
hidden-only with a reason."""
from collections import Counter

import nbformat
import pytest

from tinytorch_course import notebooks
from tinytorch_course.build import mistakes
from tinytorch_course.grading.learning import ForkedCells, through_own_tests, with_cell_replacement
from conftest import REPO
from notebook_scoring import execute, reference, test_scores as score_cells

MIN_VISIBLE_RATE = 0.8  # of a module's mutants, the share its visible tests must catch
SAYS_MAX = 240  # characters of the sentence a learner who made a mistake is shown
QUOTE_MIN = 13  # a line of the mistake's code this long, quoted in that sentence, gives the answer away
MODULES = notebooks.module_ids(REPO)


def mutants(module_id):
    return mistakes.catalogue(REPO, module_id)


CASES = [pytest.param(module_id, *mutant[:4], mutant.hidden_only, id=f"{module_id}:{mutant.cell}:{mutant.what}")
         for module_id in MODULES for mutant in mutants(module_id)]


def hidden_test_ids(notebook):
    return {notebooks.grade_id(c) for c in notebook.cells
            if notebooks.is_test(c) and notebooks.HIDDEN_MARKERS[0] in c.source}


@pytest.fixture(scope="session")
def answer_keys(shared_grading_cache):
    return lambda module_id: reference(module_id, shared_grading_cache / "answer-keys")


def lost_on(executed, records, answer_key):
    """The grade ids of the test cells of an executed notebook that lose points (visible cells on
    their own checks: a visible test must catch the mistake itself, not through the hidden ones)."""
    scores = score_cells(executed, records, answer_key, visible_alone=True)
    return {gid for gid, (score, maximum) in scores.items() if score < maximum}


def points_lost(notebook, workdir, answer_key):
    """The grade ids of the test cells that lose points when `notebook` is graded."""
    workdir.mkdir()
    return lost_on(*execute(notebook, workdir), answer_key)


@pytest.fixture(scope="session")
def forked_runs(tmp_path_factory, answer_keys):
    """`runs(module_id, source, cut, cell_id)`: the `ForkedCells` that has run the cells of `cut` (a
    mutant of the notebook `source`) before the exercise `cell_id`; the last two made are kept (a worker
    gets an exercise's mutants together). A new one is first checked on the answer key: with the
    exercise's own cell in its place, `cut` must lose no points."""
    made = {}

    def runs(module_id, source, cut, cell_id):
        at = next(i for i, c in enumerate(cut.cells)
                  if notebooks.is_solution(c) and notebooks.grade_id(c) == cell_id)
        key = (module_id, cell_id, tuple(c.source for c in cut.cells[:at]))
        if key not in made:
            if len(made) == 2:
                made.pop(next(iter(made))).close()
            forked = ForkedCells(cut.cells[:at], tmp_path_factory.mktemp(f"forked-{module_id}-{cell_id}"))
            honest = nbformat.from_dict(cut)
            honest.cells[at] = notebooks.cells_by_id(source)[cell_id]
            lost = lost_on(*forked.execute(honest), answer_keys(module_id))
            if lost:
                forked.close()
                pytest.fail(f"the answer key of {module_id} loses points on {sorted(lost)} when run by "
                            "tinytorch_course/grading/forked_cells.py: it does not run cells as the grading kernel does")
            made[key] = forked
        return made[key]

    yield runs
    for forked in made.values():
        forked.close()


def test_a_mutant_is_first_judged_by_its_own_tests_and_the_cells_they_read():
    def cell(source, gid=None, solution=False):
        made = nbformat.v4.new_code_cell(source)
        if gid:
            made.metadata["nbgrader"] = {"grade_id": gid, "grade": not solution, "solution": solution}
        return made

    notebook = nbformat.v4.new_notebook(cells=[
        cell("import numpy as np"), cell("def a(): pass", "a", True),
        cell("helper = np.ones(2)\nassert a() is None", "a_visible"), cell("x = 1", "a_hidden"),
        cell("def b():\n    return helper", "b", True), cell("assert b() is helper", "b_visible"),
        cell("y = 2", "c_visible")])
    kept = [c.source for c in through_own_tests(notebook, "b").cells]
    assert kept == ["import numpy as np", "def a(): pass", "helper = np.ones(2)\nassert a() is None",
                    "def b():\n    return helper", "assert b() is helper"]


def test_forked_runs_start_from_the_shared_cells_and_leave_them_as_they_were(tmp_path):
    code = nbformat.v4.new_code_cell
    shared = [code("from tinytorch.testing import assert_equal\nx = 1")]
    forked = ForkedCells(shared, tmp_path)
    try:
        changes = nbformat.v4.new_notebook(cells=shared + [
            code("x = 2\nassert_equal(x, 2)"), code("raise ValueError('wrong')"),
            code("assert_equal(x, 2)\n### BEGIN HIDDEN TESTS\nsecret = 3\n### END HIDDEN TESTS\n"
                 "assert_equal(x, 3)"),
            code("assert secret == 3 and 'secret' not in ''.join(In[:-1])")])  # hidden tests: not in the history
        executed, records = forked.execute(changes)
        errors = [[o.ename for o in c.outputs] for c in executed.cells]
        assert errors == [[], [], ["ValueError"], ["AssertionError"], []]
        assert [len(records[i]) for i in range(5)] == [0, 1, 0, 2, 0]  # each cell's own checks, after an error too
        executed, records = forked.execute(nbformat.v4.new_notebook(cells=shared + [code("assert_equal(x, 1)")]))
        assert executed.cells[1].outputs == [] and records[1][0]["passed"]  # x as the shared cells left it
    finally:
        forked.close()


@pytest.mark.parametrize("module_id, cell_id, wrong, old, new, hidden_only", CASES)
def test_mutant_loses_points(tmp_path, answer_keys, forked_runs, module_id, cell_id, wrong, old, new, hidden_only):
    assert old, (f"{wrong!r} was named from the class report (./course grade name-cluster): write its old and "
                 f"new in mistakes/{module_id}.py so that this test can check it")
    source = notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))
    mutant = with_cell_replacement(source, cell_id, old, new)
    hidden = hidden_test_ids(source)

    def caught(lost):
        return bool(lost & hidden) and (hidden_only is not None or bool(lost - hidden))

    # The exercise's own tests usually catch it (run after the cells before the exercise, in a fork of
    # a process that ran those once): run the whole notebook in a grading kernel only when they do not.
    cut = through_own_tests(mutant, cell_id)
    lost = lost_on(*forked_runs(module_id, source, cut, cell_id).execute(cut), answer_keys(module_id))
    if not caught(lost):
        lost = points_lost(mutant, tmp_path / "all", answer_keys(module_id))
    assert lost & hidden, f"{wrong!r} keeps full marks on every hidden test"
    if hidden_only is None:
        assert lost - hidden, (f"{wrong!r} passes every visible test: add a visible check, or tag "
                               "the mutant hidden-only with the reason the visible tests must not reveal it")


@pytest.mark.parametrize("module_id", MODULES)
def test_every_module_has_mutants(module_id):
    solution_cells = {notebooks.grade_id(c) for c in notebooks.read(
        notebooks.notebook_path(REPO, "modules", module_id)).cells if notebooks.is_solution(c)}
    assert solution_cells <= {m.cell for m in mutants(module_id)}, "each solution cell needs at least one mutant"


@pytest.mark.parametrize("module_id", MODULES)
def test_every_mistake_says_what_is_wrong_without_the_code(module_id):
    """Each mistake has its sentence for the learner: short, quoting no line of its code, and not the
    sentence of another mistake of the module."""
    found = mutants(module_id)
    unsaid = [m.what for m in found if not m.says.strip()]
    assert not unsaid, f"{module_id}: mistakes without a sentence for the learner: {unsaid}"
    long = {m.what: len(m.says) for m in found if len(m.says) > SAYS_MAX}
    assert not long, f"{module_id}: sentences longer than {SAYS_MAX} characters: {long}"
    quoting = {m.what: line for m in found for line in (m.old + "\n" + m.new).splitlines()
               if len(line.strip()) >= QUOTE_MIN and line.strip() in m.says}
    assert not quoting, f"{module_id}: sentences that quote the mistake's code: {quoting}"
    repeated = [says for says, n in Counter(m.says for m in found).items() if n > 1]
    assert not repeated, f"{module_id}: two mistakes say the same: {repeated}"


@pytest.mark.parametrize("module_id", MODULES)
def test_visible_tests_catch_most_mutants(module_id):
    found = mutants(module_id)
    hidden_only = [m for m in found if m.hidden_only is not None]
    assert all(isinstance(m.hidden_only, str) and m.hidden_only.strip() for m in hidden_only), \
        "a hidden-only tag needs a reason"
    rate = 1 - len(hidden_only) / len(found)
    assert rate >= MIN_VISIBLE_RATE, (f"{module_id}: visible tests may catch only {rate:.0%} of the "
                                      f"mutants (at least {MIN_VISIBLE_RATE:.0%})")


DRAWS = """import numpy as _np, tinytorch.tensor_base as _tb
_np.random.seed(7); _np.random.rand(13)
globals().get("default_generator", _tb.default_generator)._rng.random(13)  # module 01 defines its own
"""


@pytest.mark.parametrize("module_id", MODULES)
def test_an_honest_solution_that_draws_random_numbers_keeps_full_marks(tmp_path, answer_keys, module_id):
    """The answer key, drawing from numpy's and tinytorch's global generators before every
    exercise (as an honest alternative solution may): the grader's checks must not depend on it."""
    source = notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))
    for cell in source.cells:
        if notebooks.is_solution(cell):
            cell.source = DRAWS + cell.source
    executed, records = execute(source, tmp_path)
    scores = score_cells(executed, records, answer_keys(module_id))
    assert all(score == maximum for score, maximum in scores.values()), \
        {gid: s for gid, s in scores.items() if s[0] < s[1]}
