"""nbconvert preprocessors used when nbgrader writes feedback for learners."""
from nbgrader.preprocessors import NbGraderPreprocessor

from .notebooks import HIDDEN_MARKERS


class RedactHiddenTracebacks(NbGraderPreprocessor):
    """Cut a hidden test's traceback down to its last line, so feedback never quotes its source.

    (nbgrader's ClearHiddenTests clears the cell's source but leaves the traceback, which
    prints the lines around the failing assertion.) Runs before ClearHiddenTests, which
    removes the markers this looks for.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and HIDDEN_MARKERS[0] in cell.source:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}",
                                        "(a hidden test failed; its source is not shown)"]
        return cell, resources
