"""Feedback pages that leak no hidden test and run no script (nbgrader's GenerateFeedback, configured
in nbgrader_config.py).

* `RedactHidden` removes every line of hidden-test source from every output of the notebook (a
  submission can print what it read of the tests while they ran), cuts a hidden test's traceback to
  its last line and drops the value a hidden test cell shows last (`Out[..]`: a recorded result,
  which reads like a failure when it is an expected error). It runs before ClearHiddenTests, which
  removes the markers it reads.
* `SafeHTMLExporter` is nbconvert's HTMLExporter with HTML sanitizing on (markdown cells and
  outputs go through nbconvert's sanitizer; script, SVG and JavaScript outputs are dropped) and a
  Content-Security-Policy that lets the page load nothing and run no script. Its list of tests names
  each by its grade id and the exercise heading above it (nbgrader's says "Test cell"). Code is shown
  without syntax colours: nbconvert's page post-processing parses every tag of the page, and
  Pygments' thousands of colour spans made the feedback page cost as much as grading the notebook.
  Its compiled Jinja templates are kept for the life of the process (`CompiledTemplates`): a
  grading worker writes many pages, and compiling nbconvert's templates cost 0.4 s a page.
"""
import html
import re

from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import default

from ..build.leaks import MIN_SECRET_LENGTH, split_regions
from ..notebooks import HIDDEN_MARKERS, grade_id, heading_before, is_test

REDACTED = "[a line of a hidden test, removed by the grader]"
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
       "base-uri 'none'; form-action 'none'")


def hidden_lines(notebook):
    """The lines of the notebook's hidden tests long enough to recognise in an output."""
    found = set()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            inside, _ = split_regions(cell.source, *HIDDEN_MARKERS)
            found |= {line for line in inside if len(line) >= MIN_SECRET_LENGTH}
    return found


def redact(text, secrets):
    """`text` with each line that contains a secret line replaced by `REDACTED`."""
    if not any(secret in text for secret in secrets):
        return text
    return "\n".join(REDACTED if any(s in line for s in secrets) else line for line in text.split("\n"))


class RedactHidden(NbGraderPreprocessor):
    """No hidden-test source in any output; a hidden test's traceback is cut to its last line."""

    def preprocess(self, nb, resources):
        self._secrets = hidden_lines(nb)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        in_hidden_test = HIDDEN_MARKERS[0] in cell.source
        if in_hidden_test:  # the value of a hidden test's last line (a recorded result) is no verdict
            cell.outputs = [o for o in cell.get("outputs", []) if o.output_type != "execute_result"]
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                output.text = redact(output.text, self._secrets)
            elif output.output_type == "error":
                output.evalue = redact(output.evalue, self._secrets)
                output.traceback = ([f"{output.ename}: {output.evalue}",
                                     "(a hidden test failed; its source is not shown)"] if in_hidden_test
                                    else [redact(line, self._secrets) for line in output.traceback])
            for mime, value in output.get("data", {}).items():
                if isinstance(value, str):
                    output.data[mime] = redact(value, self._secrets)
        return cell, resources


def plain_code(source, language=None, metadata=None):
    """Code as escaped preformatted text (a `highlight_code` filter without Pygments)."""
    return f'<div class="highlight"><pre>{html.escape(source)}</pre></div>'


class CompiledTemplates(BytecodeCache):
    """Jinja's bytecode cache, in memory: each template is compiled once per process (Jinja keys
    an entry by the template's name and a checksum of its source)."""

    def __init__(self):
        self._compiled = {}

    def load_bytecode(self, bucket):
        if bucket.key in self._compiled:
            bucket.bytecode_from_string(self._compiled[bucket.key])

    def dump_bytecode(self, bucket):
        self._compiled[bucket.key] = bucket.bytecode_to_string()


class SafeHTMLExporter(HTMLExporter):
    """HTMLExporter with sanitized HTML, uncoloured code, and a page that may load and run nothing."""

    @default("sanitize_html")
    def _sanitize_default(self):
        return True

    @default("filters")
    def _filters_default(self):
        return {"highlight_code": plain_code}

    _compiled_templates = CompiledTemplates()

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = self._compiled_templates
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        self.sanitize_html = True  # whatever the configuration says
        labels = toc_labels(nb)
        page, resources = super().from_notebook_node(nb, resources, **kw)
        page = re.sub(r'<a href="#([A-Za-z0-9_\-]+)">Test cell</a>',
                      lambda m: f'<a href="#{m.group(1)}">{html.escape(labels.get(m.group(1), m.group(1)))}</a>',
                      page)
        meta = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        return re.sub(r"<head[^>]*>", lambda m: m.group(0) + "\n" + meta, page, count=1), resources


def toc_labels(notebook):
    """`{grade id: "window_layout_hidden: hidden test of Exercise 1 — window_layout"}`: what the
    feedback's list of tests calls each test cell (nbgrader's template says "Test cell" for all)."""
    labels = {}
    for index, cell in enumerate(notebook.cells):
        if is_test(cell):
            kind = "hidden test" if HIDDEN_MARKERS[0] in cell.source else "test"
            heading = heading_before(notebook, index).replace("`", "")
            labels[grade_id(cell)] = f"{grade_id(cell)}: {kind}" + (f" of {heading}" if heading else "")
    return labels
