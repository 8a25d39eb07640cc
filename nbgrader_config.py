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

# The answer keys run in an isolated kernel (`python -I`: the notebook's folder is not on sys.path).
c.Execute.kernel_name = "tinytorch-grader"

# Submissions run in a bubblewrap sandbox and each test cell is judged by the grader's own
# checks (tinytorch_course/grading/sandbox.py), whichever route autogrades: `./course grade run`,
# `nbgrader autograde` or the formgrader's button. What it finds for review flags the notebook.
c.Autograde.autograde_preprocessors = [
    "tinytorch_course.grading.sandbox.SandboxedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    # (no CheckCellMetadata here: Autograde's sanitize step checked the same metadata before it ran)
    "tinytorch_course.grading.sandbox.FlagForReview",
    "nbconvert.preprocessors.sanitize.SanitizeHTML",  # the formgrader shows what is stored: no live script
]

# Feedback shows which tests failed but never the source of hidden tests (not in a cell, a
# traceback or any output), and the page runs no script (sanitized HTML, a strict CSP). The
# formgrader renders submissions with sanitized HTML too.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "tinytorch_course.grading.feedback.RedactHidden",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.sanitize.SanitizeHTML",  # nbgrader's template renders markdown unsanitized
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
c.GenerateFeedback.exporter_class = "tinytorch_course.grading.feedback.SafeHTMLExporter"
c.SanitizeHTML.tags = ["a", "abbr", "b", "blockquote", "code", "em", "i", "li", "ol", "strong", "ul",
                       "details", "summary", "br", "sub", "sup", "kbd"]  # bleach's, plus the course's hints
c.SanitizeHTML.enabled = True  # nbconvert's preprocessors do nothing unless enabled
c.SanitizeHTML.strip = True  # tags not allowed are removed (their text stays), not shown escaped
c.HTMLExporter.sanitize_html = True

# Collecting trusts nothing in a submission (tinytorch_course/grading/intake.py). The LMS zip route
# (`nbgrader zip_collect`): archives hold `<student-id>_<NN_module>.ipynb`, each learner's uploads
# in a folder of their own where the LMS makes one; nested archives are unpacked safely.
c.ZipCollectApp.extractor_plugin = "tinytorch_course.grading.intake.SafeExtractor"
c.ZipCollectApp.collector_plugin = "tinytorch_course.grading.intake.RosterCollector"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9-]+)_(?P<file_id>\d\d_[a-z_]+\.ipynb)$"
)
# nbgrader's exchange: a submission counts only from the learner who owns it, at its real time.
c.ExchangeFactory.collect = "tinytorch_course.grading.intake.TrustedExchangeCollect"

# Executed solutions must not change on every build: no per-cell timestamps.
c.Execute.record_timing = False
