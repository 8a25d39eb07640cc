"""Course tooling for TinyTorch: building the release and solutions, grading, and the demo.

It is kept apart from `tinytorch`, the library that learners build.
"""
