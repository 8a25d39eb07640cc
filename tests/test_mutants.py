"""Hidden tests have teeth: every plausible wrong answer in tests/mutants/ loses points."""
import importlib

import pytest

from tinytorch_course import notebooks
from conftest import REPO
from notebook_scoring import execute, test_scores as score_cells, with_cell_replacement

CASES = [
    pytest.param(module_id, *mutant, id=f"{module_id}:{mutant[0]}:{mutant[1]}")
    for module_id in notebooks.module_ids(REPO)
    for mutant in importlib.import_module(f"mutants.m{module_id}").MUTANTS
]


def hidden_test_ids(notebook):
    return {notebooks.grade_id(c) for c in notebook.cells
            if notebooks.is_graded(c) and notebooks.HIDDEN_MARKERS[0] in c.source}


@pytest.mark.parametrize("module_id, cell_id, wrong, old, new", CASES)
def test_mutant_loses_points_on_hidden_tests(tmp_path, module_id, cell_id, wrong, old, new):
    source = notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))
    scores = score_cells(execute(with_cell_replacement(source, cell_id, old, new), tmp_path))
    lost = {gid for gid, (score, maximum) in scores.items() if score < maximum}
    assert lost & hidden_test_ids(source), f"{wrong!r} keeps full marks on every hidden test"


@pytest.mark.parametrize("module_id", notebooks.module_ids(REPO))
def test_every_module_has_mutants(module_id):
    mutants = importlib.import_module(f"mutants.m{module_id}").MUTANTS
    solution_cells = {notebooks.grade_id(c) for c in notebooks.read(
        notebooks.notebook_path(REPO, "modules", module_id)).cells if notebooks.is_solution(c)}
    assert solution_cells <= {m[0] for m in mutants}, "each solution cell needs at least one mutant"
