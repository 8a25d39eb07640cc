"""Course tooling for TinyTorch: building the release and solutions, grading, and the demo.

It is kept apart from `tinytorch`, the library that learners build. Its folders are its jobs:
`build/` (the course from modules/), `kit/` (the learner's workspace kit and milestones),
`grading/` (submissions to grades) and `hub/` (a class on JupyterHub); the modules here are
shared by all of them (`notebooks`, `nbgrader_api`, `progress`) or run them (`__main__`, `demo`).
"""
