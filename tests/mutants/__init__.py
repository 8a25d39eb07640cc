"""Plausible wrong answers, one file per module: `MUTANTS = [(cell id, what is wrong, old, new)]`.

Each mutant replaces `old` by `new` (once) in a solution cell of the source notebook. It must lose
points on a hidden test, and on a visible test too (tests/test_mutants.py). A mutant that the
visible tests must not reveal (it would give the answer away) carries a fifth element: the
one-line reason, e.g. `(..., "hidden-only: the visible tests show one case, this is another")`.
"""
