"""Grading learners' submissions. Read in this order: the instructor's steps behind
`./course grade` (`grading`; `lms` for an LMS's import file); collecting files that trust nothing
in a submission (`intake`); grading each (learner, module) in its own job (`autograder`), whose
cells run in a bubblewrap sandbox (`sandbox`; the kernel's launcher `sandbox_kernel`, and inside
it `kernel_main` and `kernel_guard`; a job's limits `cgroups`); points from comparing the
submission's records with the answer key's (`verdicts`, the untouched release's run `release_run`,
their cache `grading_cache`); what a failed check says (`diagnose`: a catalogued mistake, learned by
`learning` with `forked_cells`, or the kind of difference); the feedback a learner reads
(`feedback`); and what the instructor reads of a whole class (`class_report`).
"""
