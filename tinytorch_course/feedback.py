"""The preprocessors and the exporter that nbgrader uses to write feedback for learners."""
import re

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
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


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter minus its BeautifulSoup pass, which takes two thirds of the time of
    a feedback page (about 0.3 s a notebook). With the classic template that nbgrader's feedback
    extends, that pass only adds alt text to images that lack it; this adds the same text with a
    regular expression (`tests/test_grading.py` checks that both give the same document)."""

    def from_notebook_node(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node (nbconvert 7.17) up to its BeautifulSoup pass
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return _IMG_WITHOUT_ALT.sub(rf'<img\1 alt="{_NO_ALT}"\2>', html), resources


_NO_ALT = "No description has been provided for this image"
_ATTRIBUTES = r"""(?:[^>"']|"[^"]*"|'[^']*')*?"""  # quoted values may hold ">"
_IMG_WITHOUT_ALT = re.compile(rf"""<img\b(?!{_ATTRIBUTES}(?<=[\s"'])alt(?=[\s=/>]))({_ATTRIBUTES})(\s*/?)>""",
                              re.IGNORECASE)
