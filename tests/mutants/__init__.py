"""Plausible wrong answers, one file per module: `MUTANTS = [(cell id, what is wrong, old, new)]`.

Each mutant replaces `old` by `new` (once) in a solution cell of the source notebook; the
hidden tests must then cost it points (tests/test_mutants.py).
"""
