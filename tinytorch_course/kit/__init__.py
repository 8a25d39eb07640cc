"""The learner's side: the workspace kit (`workspace` makes it, `./course workspace`) and the
milestones run with the reference package (`milestone`, `./course milestone`; `torch_gpt`, the
PyTorch twin of milestone 07's GPT).

The kit ships `learner.py` (as tinytorch_kit/__init__.py: the commands behind ./learn), `nbcells.py`
and `kernels.py`, and this folder's plain files (`setup`, `learn`, `gitignore`, `lab-overrides.json`,
the README's template). Those three modules import only one another: the kit reaches learners
without the rest of this package. The course's own tooling imports them (`notebooks` reads
notebooks with `nbcells`; grading starts kernels with `kernels`).
"""
