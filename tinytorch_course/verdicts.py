"""Trusted verdicts: every graded test cell is judged outside the process that ran it.

A submission runs in the same interpreter as its tests, so whatever that interpreter reports
(an error output, a printed line) can be forged by the submission. The checks of
`tinytorch.testing` therefore also append what they checked, as plain data, to a records file
(`$TINYTORCH_RECORDS`); `RecordingExecute` notes which records each cell wrote. `judge` then
compares a submission's records with the answer key's records of the same cells, here, in the
grader's own process:

* a hidden test's `record(value)` must equal the answer key's value on the same inputs (the
  expected value never exists in the submission's process, so it cannot be copied or forged);
* a visible `assert_equal`/`assert_close` is recomputed from the recorded values with the answer
  key's expected value (or, where that differs because it came from the learner's own objects,
  with the recorded one);
* a check the answer key made that the submission's run did not make fails the cell.

A cell whose kernel reported no error although its records show a failed or missing check is
reported as interference (the submission hid an error from nbgrader).
"""
import json
import os
import tempfile
from pathlib import Path
import stat

import nbformat
from nbclient.util import run_sync
from nbgrader.preprocessors import Execute
from traitlets import Dict, Set, Unicode

from tinytorch.testing import ErrorValue, close, decoded, default_tolerance, equal, same_error

from . import grading_cache, notebooks
from .kernels import UnixSocketKernelManager

RECORDS_ENV = "TINYTORCH_RECORDS"
MAX_RECORD_BYTES = 64 << 20  # what one notebook's run may record
VISIBLE_KINDS = ("equal", "close", "raises", "true")


def split_hidden(source):
    """`[(code, hidden)]`: a cell's source cut at its hidden-test markers, in order."""
    begin, end = notebooks.HIDDEN_MARKERS
    parts, current, hidden = [], [], False
    for line in source.splitlines(keepends=True):
        if line.strip() in (begin, end):
            parts.append(("".join(current), hidden))
            current, hidden = [], line.strip() == begin
        else:
            current.append(line)
    parts.append(("".join(current), hidden))
    return [(code, hidden) for code, hidden in parts if code.strip()]


def read_new_records(path, offset):
    """`(records, new offset)`: the JSON lines written to `path` after `offset`. The file is
    opened without following links and must be a regular file; lines that are not JSON objects
    are dropped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return [], offset
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return [], offset
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, max(0, MAX_RECORD_BYTES - offset))
    finally:
        os.close(fd)
    records = []
    for line in data.split(b"\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("kind"), str):
            records.append(entry)
    return records, offset + len(data)


class RecordingExecute(Execute):
    """nbgrader's Execute that notes each cell's records (`cell_records`, by cell index) and runs
    hidden-test regions without storing them in the kernel's input history."""

    records_path = Unicode("", help="the records file the kernel appends to").tag(config=True)
    extra_env = Dict(help="more environment variables for the kernel").tag(config=True)
    skip_sources = Set(Unicode(), help="code cells with exactly these sources are not run (those the "
                        "course's notebook tags `notebooks.SKIP_WHEN_GRADED`)").tag(config=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", UnixSocketKernelManager)  # nbgrader's sets its own
        super().__init__(**kwargs)

    def kernel_env(self):
        """The kernel's environment: ours, plus where to write records and `extra_env`."""
        return {**os.environ, RECORDS_ENV: self.records_path, **self.extra_env}

    async def async_start_new_kernel(self, **kwargs):
        kwargs.setdefault("env", self.kernel_env())
        return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the base method here

    def preprocess(self, nb, resources=None, km=None):
        self.cell_records, self._offset = {}, 0
        Path(self.records_path).touch()
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and cell.source in self.skip_sources:
            return cell, resources
        if cell.cell_type == "code" and notebooks.HIDDEN_MARKERS[0] in cell.source:
            cell = self._execute_in_parts(cell, index)
        else:
            cell, resources = super().preprocess_cell(cell, resources, index)
        self.cell_records[index], self._offset = read_new_records(self.records_path, self._offset)
        return cell, self.resources

    def _execute_in_parts(self, cell, index):
        """Run the code around and inside the hidden markers one part at a time, the hidden parts
        with store_history=False (not in `In`/`_ih`); stop at the first part that fails."""
        outputs = []
        for code, hidden in split_hidden(cell.source):
            part = nbformat.v4.new_code_cell(code, metadata=cell.metadata)
            part = self.execute_cell(part, index, store_history=not hidden)
            outputs += part.outputs
            if hidden is False and part.execution_count:
                cell.execution_count = part.execution_count
            if any(o.output_type == "error" for o in part.outputs):
                break
        cell.outputs = outputs
        self.nb.cells[index] = cell
        return cell


def records_by_grade_id(notebook, cell_records):
    """`{grade id: records}` of the graded test cells of an executed notebook."""
    return {notebooks.grade_id(cell): cell_records.get(index, [])
            for index, cell in enumerate(notebook.cells)
            if notebooks.is_test(cell)}


def _key(entry):
    loc = entry.get("loc")
    return entry.get("kind"), tuple(loc) if isinstance(loc, list) else None


def _align(reference, learner):
    """Pair each reference record with the next learner record of the same kind and place."""
    pairs, position = [], 0
    for expected in reference:
        match = None
        for i in range(position, len(learner)):
            if _key(learner[i]) == _key(expected):
                match, position = learner[i], i + 1
                break
        pairs.append((expected, match))
    return pairs


def _compare_values(got, want, rtol, atol):
    """A recorded result against the answer key's: errors by class, floats within tolerance,
    arrays with equal dtype and shape, everything else exactly."""
    if isinstance(want, ErrorValue):
        return same_error(got, want)
    if hasattr(want, "dtype") and hasattr(got, "dtype") and got.dtype != want.dtype:
        return False, f"expected a {want.dtype} result, got {got.dtype}"
    floating = isinstance(want, float) or getattr(getattr(want, "dtype", None), "kind", "") == "f"
    if floating:
        default_rtol, default_atol = default_tolerance(want)
        return close(got, want, default_rtol if rtol is None else rtol,
                     default_atol if atol is None else atol)
    return equal(got, want)


def _judge_pair(expected, got_entry):
    """`(ok, why)` for one check."""
    kind = expected["kind"]
    try:
        got = decoded(got_entry.get("got"))
        if kind in ("equal", "close"):
            want_key = decoded(expected.get("want"))
            want_here = decoded(got_entry.get("want"))
            canonical = (equal(want_here, want_key)[0] if kind == "equal"
                         else close(want_here, want_key, expected["rtol"], expected["atol"])[0])
            want = want_key if canonical else want_here
            if kind == "equal":
                return equal(got, want)
            return close(got, want, expected["rtol"], expected["atol"])
        if kind == "raises":
            return same_error(got, expected["expected"], expected.get("match"))
        if kind == "true":
            return (got is True), "expected it to hold, but it does not"
        want = decoded(expected.get("got"))
        if kind == "record_error" and isinstance(want, ErrorValue):
            return same_error(got, want, expected.get("match"))
        return _compare_values(got, want, expected.get("rtol"), expected.get("atol"))
    except Exception as error:  # noqa: BLE001  (records are untrusted data: any oddity fails)
        return False, f"unreadable record ({type(error).__name__})"


class CellVerdict:
    """The trusted verdict on one graded test cell."""

    def __init__(self, failures, interference, value_checks_passed):
        self.failures = failures  # readable reasons, empty when the cell passes
        self.interference = interference  # the kernel hid a failure from nbgrader
        self.value_checks_passed = value_checks_passed  # hidden `record` checks that matched

    @property
    def passed(self):
        return not self.failures


def judge_cell(reference, learner, kernel_failed, hidden):
    """The verdict on a cell from its answer-key records and the submission's records.

    `kernel_failed`: the executed cell has an error output; `hidden`: the cell is a hidden
    test (its messages then name what was checked, never the values)."""
    failures, interference, value_checks_passed = [], False, 0
    for expected, got_entry in _align(reference, learner):
        what = expected.get("what") or f"the check on line {_key(expected)[1]}"
        if got_entry is None:
            failures.append(f"{what}: this check did not run")
            interference |= not kernel_failed
            continue
        ok, why = _judge_pair(expected, got_entry)
        if expected["kind"] in VISIBLE_KINDS and got_entry.get("passed") is False and not kernel_failed:
            interference = True
        if ok:
            value_checks_passed += expected["kind"] == "record"
        elif hidden:
            failures.append(f"a hidden check failed: {what}")
        else:
            failures.append(f"{what}: {why}")
    return CellVerdict(failures, interference, value_checks_passed)


def kernel_failed(cell):
    return any(o.output_type == "error" for o in cell.get("outputs", []))


def twin_of(grade_id):
    """The hidden test cell of an exercise whose visible test cell is `grade_id`."""
    return grade_id[:-len("_visible")] + "_hidden" if grade_id.endswith("_visible") else None


def judge(notebook, cell_records, reference):
    """`{grade id: CellVerdict}` for the graded test cells of an executed submission.

    `reference`: `{grade id: records}` of the answer key (`reference_records`)."""
    learner = records_by_grade_id(notebook, cell_records)
    cells = notebooks.cells_by_id(notebook)
    return {gid: judge_cell(reference.get(gid, []), records, kernel_failed(cells[gid]),
                            notebooks.HIDDEN_MARKERS[0] in cells[gid].source)
            for gid, records in learner.items()}


def visible_without_hidden(notebook, verdicts, reference):
    """Visible test cells that pass while none of their exercise's hidden `record` checks
    match the answer key: answers fitted to the visible examples, or a forged visible test."""
    cells = notebooks.cells_by_id(notebook)
    found = []
    for gid, verdict in verdicts.items():
        twin = twin_of(gid)
        if (twin in verdicts and verdict.passed and not kernel_failed(cells[gid])
                and any(r["kind"] == "record" for r in reference.get(twin, []))
                and verdicts[twin].value_checks_passed == 0):
            found.append(gid)
    return found


def mark_failures(notebook, verdicts):
    """Add an error output to each test cell whose trusted verdict fails and whose kernel showed
    no error, so that nbgrader scores it 0 and the feedback says why."""
    cells = notebooks.cells_by_id(notebook)
    for gid, verdict in verdicts.items():
        if verdict.failures and not kernel_failed(cells[gid]):
            cells[gid].outputs.append(nbformat.v4.new_output(
                "error", ename="AssertionError", evalue="; ".join(verdict.failures[:3]),
                traceback=["AssertionError: the grader's own check of this cell failed:"]
                + [f"  {reason}" for reason in verdict.failures[:10]]))
    return notebook


# ------------------------------------------------------------------ the answer key's records


def execute_recording(notebook, workdir, records_path, kernel_name, timeout=120, **traits):
    """Execute `notebook` (modified in place) with a `RecordingExecute`; returns its
    `cell_records`."""
    executor = RecordingExecute(kernel_name=kernel_name, timeout=timeout, records_path=str(records_path),
                                **traits)
    executor.preprocess(notebook, {"metadata": {"path": str(workdir)}})
    return executor.cell_records


def reference_records(root, module_id, cache_dir, kernel_name):
    """`{grade id: records}` of the answer key: the source notebook run with its solutions,
    cached in `cache_dir` under the digest of what it is made from (`grading_cache.key`)."""
    cache = Path(cache_dir) / f"{module_id}-{grading_cache.key(root, module_id)}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    cache.parent.mkdir(parents=True, exist_ok=True)
    notebook = notebooks.read(notebooks.notebook_path(root, "modules", module_id))
    workdir = notebooks.notebook_path(root, "modules", module_id).parent
    # files of this process only: another process sharing the cache may be making the same key
    with tempfile.TemporaryDirectory(prefix=f"{module_id}-", dir=cache.parent) as scratch:
        # the kernel runs as submissions do: nbgrader sets NBGRADER_EXECUTION for them (in the kernel's
        # environment only: nbgrader's own `setenv` around this process's may be running)
        cell_records = execute_recording(notebook, workdir, Path(scratch) / "records.jsonl", kernel_name,
                                         extra_env={"NBGRADER_EXECUTION": "autograde"},
                                         skip_sources=notebooks.skipped_when_graded(notebook))
        errors = notebooks.error_outputs(notebook)
        if errors:
            raise RuntimeError(f"the answer key of {module_id} raised: {errors[:3]}")
        found = records_by_grade_id(notebook, cell_records)
        temporary = Path(scratch) / "key.json"
        temporary.write_text(json.dumps(found))
        temporary.replace(cache)
    return found
