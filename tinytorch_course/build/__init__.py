"""Building the course from `modules/`: nbdev's export of the reference package, nbgrader's
release and answer keys (`pipeline`, behind `./course build`), the checks that keep hidden tests
and solutions out of what learners get (`hidden_names`, `leaks`), the per-learner hidden inputs
(`hidden_inputs`) and the catalogue of plausible learner mistakes (`mistakes`).

It never imports grading code: grading uses what the build made.
"""
