"""nbgrader configuration for the TinyTorch course (the course directory is this folder)."""
from pathlib import Path

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "tinytorch"
c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.CourseDirectory.source_directory = "modules"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.solution_directory = "solutions"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + str(Path(__file__).resolve().parent / "gradebook.db")

# Learners see stubs in place of solutions and never see hidden tests.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.enforce_metadata = True

# Every cell gets at most this long when solutions are generated or submissions are graded;
# a cell that runs longer is interrupted and only that cell's tests lose their points.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# Grade in an isolated kernel: `python -I` keeps the submission's folder off sys.path, so a
# `tinytorch/` shipped inside a submission cannot shadow the reference package.
c.Execute.kernel_name = "tinytorch-grader"

# Feedback shows which tests failed but never the source of hidden tests (neither in the cell
# nor in a traceback).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "tinytorch_course.feedback.RedactHiddenTracebacks",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# The LMS zip route (`nbgrader zip_collect`): archives hold `<student-id>_<NN_module>.ipynb`.
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9-]+)_(?P<file_id>\d\d_[a-z_]+\.ipynb)$"
)

# Executed solutions must not change on every build: no per-cell timestamps.
c.Execute.record_timing = False
