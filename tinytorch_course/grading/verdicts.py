"""Trusted verdicts: every graded test cell is judged outside the process that ran it.

A submission runs in the same interpreter as its tests, so whatever that interpreter reports
(an error output, a printed line) can be forged by the submission. The checks of
`tinytorch.testing` therefore also append what they checked, as plain data, to a records file
(`$TINYTORCH_RECORDS`); `RecordingExecute` notes which records each cell wrote. `judge` then
compares a submission's records with the answer key's records of the same cells, here, in the
grader's own process. No point may be earned by a value that the notebook itself contains or that a
guess finds:

* a cell's records must be the key's records, in number, kind, place and order (records written
  ahead of, instead of or besides the checks fail it); each is judged with the key's result: a
  hidden test's `record(value)` must equal the answer key's value on the same inputs, a visible
  `assert_equal`/`assert_close` is recomputed from the recorded values with the answer key's
  expected value (or, where that differs because it came from the learner's own objects, with the
  recorded one);
* the answer key marks its *informative* records (`mark_informative`): hidden records whose value
  neither the untouched release computes too (`release_run`) nor a guess finds;
* a cell earns its points only when every cell of its exercise that holds informative records
  passes as well (`judge`): visible checks, whose expected values are in the notebook, and hidden
  ones that record only free values count only with the learner's own work.

A cell whose kernel reported no error although its records show a failed or missing check is
reported as interference (the submission hid an error from nbgrader).
"""
import copy
import json
import os
import tempfile
from pathlib import Path
import stat

import nbformat
from nbclient.util import run_sync
from nbgrader.preprocessors import ClearSolutions, Execute
from traitlets import Dict, Set, Unicode

import numpy as np
from tinytorch.testing import FIXED_SEED, HIDDEN_SEED_ENV, ErrorValue, close, decoded, default_tolerance, equal, same_error

from . import grading_cache
from .. import notebooks
from ..kit.kernels import UnixSocketKernelManager

HERE = Path(__file__).resolve().parent
RECORDS_ENV = "TINYTORCH_RECORDS"
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # nbgrader_config.py's ClearSolutions.code_stub
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


def record_key(entry):
    """`(kind, (file, line))`: what a record checked and where; None for a malformed place."""
    loc = entry.get("loc")
    place = (tuple(loc) if isinstance(loc, list) and len(loc) == 2 and isinstance(loc[0], str)
             and isinstance(loc[1], int) else None)
    return entry.get("kind"), place


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


def judge_record(expected, got_entry):
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


# ------------------------------------------------------------------ which records show work


def _guess(value):
    """The one guess that finds a key's decoded `value`, or "" if no single guess does: True,
    False, None, and any error (the notebook names the class it expects, and a forged error may
    list every class)."""
    if isinstance(value, ErrorValue):
        return "an error"
    if isinstance(value, np.ndarray) and value.dtype == bool and value.size == 1:
        value = bool(value.item())
    return repr(value) if value is None or isinstance(value, bool) else ""


def computed_by_test(key, release):
    """`{grade id: indices}` of the answer key's `record`/`record_error` records (`key`, `{grade id:
    records}`) whose value the run of the release notebook (`release`, the stubs: no work done)
    recorded at the same place too: values the test computes itself."""
    computed = {}
    for gid, records in key.items():
        stubs = {}
        for entry in release.get(gid, []):
            stubs.setdefault(record_key(entry), []).append(entry)
        seen = {}
        for index, entry in enumerate(records):
            place = record_key(entry)
            occurrence = seen[place] = seen.get(place, -1) + 1
            twins = stubs.get(place, [])
            if (entry["kind"] in ("record", "record_error") and occurrence < len(twins)
                    and judge_record(entry, twins[occurrence])[0]):
                computed.setdefault(gid, set()).add(index)
    return computed


def mark_informative(key, release, base=None):
    """Set `informative` on each record of the answer key `key` (`{grade id: records}`, changed in
    place): a hidden `record`/`record_error` whose value shows the learner's work. Not informative:
    every visible check (its expected value is in the notebook); a value the test computes itself
    (`computed_by_test`: the release run `release` recorded it too, at the same place, as the answer
    key `base` did, by default `key` itself: `base` may be the key of other inputs whose records are
    at the same places); a value a guess finds (`_guess`), unless a cell's
    guessable values of one kind differ from one another (then no one guess finds them all, and they
    count together)."""
    computed = computed_by_test(key if base is None else base, release)
    for gid, records in key.items():
        guessed = {}  # guessable records by kind
        for index, entry in enumerate(records):
            entry["informative"] = False
            if entry["kind"] not in ("record", "record_error") or index in computed.get(gid, ()):
                continue
            guess = _guess(decoded(entry.get("got")))
            if guess:
                guessed.setdefault(entry["kind"], []).append((entry, guess))
            else:
                entry["informative"] = True
        for together in guessed.values():
            if len({guess for _, guess in together}) > 1:
                for entry, _ in together:
                    entry["informative"] = True
    return key


def layout(key):
    """`{grade id: [(kind, place)]}`: where an answer key's records are, without their values."""
    return {gid: [record_key(entry) for entry in records] for gid, records in key.items()}


def is_informative(records):
    return any(entry.get("informative") for entry in records)


def informative_cells(reference, group):
    """The grade ids of the test cells of `group` (`test_group`) that hold informative records."""
    return sorted(gid for gid, records in reference.items()
                  if test_group(gid) == group and is_informative(records))


def unproven_exercises(reference):
    """Test groups none of whose records is informative: their points can be had by guesses."""
    return sorted({test_group(gid) for gid in reference} - {test_group(gid) for gid, records in reference.items()
                                                              if is_informative(records)})


def test_group(grade_id):
    """The group of a test cell, its grade id without `_visible`/`_hidden`: a visible test and the
    hidden one that checks the same thing (the exercise it tests, the solution cell, is
    `learning.exercise_of`; a group may test several)."""
    for suffix in ("_visible", "_hidden"):
        if grade_id.endswith(suffix):
            return grade_id[:-len(suffix)]
    return grade_id


# ------------------------------------------------------------------ verdicts


class CellVerdict:
    """The trusted verdict on one graded test cell."""

    def __init__(self, failures, interference, informative_matched):
        self.failures = failures  # readable reasons, empty when the cell passes
        self.interference = interference  # the kernel hid a failure from nbgrader
        self.informative_matched = informative_matched  # informative records equal to the key's
        self.records_passed = not failures  # its own records all match (before the exercise's rule)

    @property
    def passed(self):
        return not self.failures


def judge_cell(reference, learner, kernel_failed, hidden):
    """The verdict on a cell's own records, against the answer key's: the same checks, in the
    same order, each with the key's result. Records placed in other code (none of the files the
    key's records name: a learner's own use of the checks) are left aside; any other record that
    the key's run did not make fails the cell.

    `kernel_failed`: the executed cell has an error output; `hidden`: the cell is a hidden
    test (its messages then name what was checked, never the values)."""
    files = {place[0] for _, place in map(record_key, reference) if place}
    learner = [entry for entry in learner if (record_key(entry)[1] or ("",))[0] in files]
    pairs = list(zip(reference, learner))
    same = next((i for i, (e, g) in enumerate(pairs) if record_key(e) != record_key(g)), len(pairs))
    failures, interference, informative_matched = [], False, 0
    for expected, got_entry in pairs[:same]:
        what = expected.get("what") or f"the check on line {record_key(expected)[1][1]}"
        ok, why = judge_record(expected, got_entry)
        if expected["kind"] in VISIBLE_KINDS and got_entry.get("passed") is False and not kernel_failed:
            interference = True
        if ok:
            informative_matched += bool(expected.get("informative"))
        elif hidden:
            failures.append(f"a hidden check failed: {what}")
        else:
            failures.append(f"{what}: {why}")
    if same == len(learner) < len(reference) and kernel_failed:  # the cell stopped at its error
        what = reference[same].get("what") or "a check"
        failures.append("a hidden check did not run" if hidden else f"{what}: this check did not run")
    elif not same == len(learner) == len(reference):
        failures.append(f"the cell's checks did not run as the answer key's did: {len(learner)} recorded "
                        f"where the key has {len(reference)}, the first difference at check {same + 1} "
                        "(records written ahead of, instead of or besides the checks?)")
        interference |= not kernel_failed
    return CellVerdict(failures, interference, informative_matched)


def kernel_failed(cell):
    return any(o.output_type == "error" for o in cell.get("outputs", []))


def judge(notebook, cell_records, reference):
    """`{grade id: CellVerdict}` for the graded test cells of an executed submission.

    `reference`: `{grade id: records}` of the answer key (`reference_records`). A cell earns its
    points only when its own records match the key's and every cell of its exercise that holds
    informative records (`mark_informative`) passes too: visible tests, and hidden ones that record
    only values the notebook holds or a guess finds, count only with the learner's own work. (An
    exercise without informative records, `unproven_exercises`, is judged by its cells' own.)"""
    learner = records_by_grade_id(notebook, cell_records)
    cells = notebooks.cells_by_id(notebook)
    judged = {gid: judge_cell(reference.get(gid, []), records, kernel_failed(cells[gid]),
                              notebooks.HIDDEN_MARKERS[0] in cells[gid].source)
              for gid, records in learner.items()}
    for gid, verdict in judged.items():
        sources = informative_cells(reference, test_group(gid))
        if verdict.records_passed and any(g not in judged or not judged[g].records_passed for g in sources):
            verdict.failures.append(f"its points count only when the hidden checks of {', '.join(sources)} "
                                    "pass as well")
    return judged


def visible_without_hidden(notebook, verdicts, reference):
    """Test cells whose own checks pass while none of the informative records of their exercise
    match the answer key: answers fitted to the visible examples, or forged checks."""
    cells = notebooks.cells_by_id(notebook)
    found = []
    for gid, verdict in verdicts.items():
        sources = [g for g in informative_cells(reference, test_group(gid)) if g in verdicts]
        if (verdict.records_passed and not kernel_failed(cells[gid]) and sources and gid not in sources
                and sum(verdicts[g].informative_matched for g in sources) == 0):
            found.append(gid)
    return found


def review(notebook, cell_records, reference, guard_records):
    """`(judged, reasons, notes)` for an executed submission: `judge`'s verdicts, the reasons to flag
    it for review (errors hidden from nbgrader, answers fitted to the visible examples, the
    integrity guard's findings or its silence: `guard_records`, the records of `kernel_guard`), and
    notes for the summary."""
    judged = judge(notebook, cell_records, reference)
    cells = notebooks.cells_by_id(notebook)
    reasons, notes = [], []
    hidden_errors = sorted(gid for gid, v in judged.items() if v.interference)
    if hidden_errors:
        reasons.append("the kernel reported no error where the grader's checks failed or did not "
                       f"run (the submission hid errors from nbgrader): {', '.join(hidden_errors)}")
    fitted = visible_without_hidden(notebook, judged, reference)
    if fitted:
        reasons.append("passes the visible tests but none of the hidden checks of "
                       f"{', '.join(fitted)} (answers fitted to the visible examples?)")
    if not any(r.get("closing") is True for r in guard_records):
        reasons.append("the integrity check did not report (the submission may have "
                       "interfered with the grader)")
    findings = [finding for record in guard_records if isinstance(record.get("findings"), list)
                for finding in record["findings"]]
    reasons += [f"{what} (in cell {cell})" for what, cell in
                (f for f in findings if isinstance(f, list) and len(f) == 2 and isinstance(f[0], str))][:20]
    overruled = sorted(gid for gid, v in judged.items()
                       if v.failures and not v.interference and not kernel_failed(cells[gid]))
    if overruled:
        notes.append(f"the grader's own checks failed where the notebook's did not: {', '.join(overruled)}")
    return judged, sorted(set(reasons), key=reasons.index), notes


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


def release_notebook(notebook):
    """A copy of a source notebook as the release hands it out: every solution region replaced by
    the stub (nbgrader's own ClearSolutions, configured as `nbgrader_config.py` does)."""
    release = nbformat.from_dict(copy.deepcopy(notebook))
    ClearSolutions(code_stub={"python": STUB}, enforce_metadata=True).preprocess(release, {})
    return release


def _run_key(notebook, workdir, records_path, kernel_name, seed):
    """`{grade id: records}` of `notebook` run as submissions are run, its hidden inputs drawn with
    `seed`."""
    # the kernel runs as submissions do: nbgrader sets NBGRADER_EXECUTION for them (in the kernel's
    # environment only: nbgrader's own `setenv` around this process's may be running)
    cell_records = execute_recording(notebook, workdir, records_path, kernel_name,
                                     extra_env={"NBGRADER_EXECUTION": "autograde", HIDDEN_SEED_ENV: seed},
                                     skip_sources=notebooks.skipped_when_graded(notebook))
    return records_by_grade_id(notebook, cell_records)


def _cached_run(root, module_id, cache_dir, kernel_name, seed, release):
    """`{grade id: records}` of the source notebook (`release` False: the answer key) or of the
    release's stubs (`release_run`) run with hidden-input seed `seed`; cached in `cache_dir`."""
    kind = "release" if release else "key"
    cache = Path(cache_dir) / f"{module_id}-{kind}-{grading_cache.key(root, module_id, kind, seed)}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    cache.parent.mkdir(parents=True, exist_ok=True)
    path = notebooks.notebook_path(root, "modules", module_id)
    notebook = notebooks.read(path)
    if release:
        notebook = release_notebook(notebook)
        notebook.cells.insert(0, nbformat.v4.new_code_cell(
            (HERE / "release_run.py").read_text() + "\ninstall(get_ipython())\n"))
    # files of this process only: another process sharing the cache may be making the same entry
    with tempfile.TemporaryDirectory(prefix=f"{module_id}-", dir=cache.parent) as scratch:
        found = _run_key(notebook, path.parent, Path(scratch) / "records.jsonl", kernel_name, seed)
        errors = notebooks.error_outputs(notebook)  # none in the release run: it goes on past errors
        if errors:
            raise RuntimeError(f"the {'release run' if release else 'answer key'} of {module_id} raised "
                               f"(hidden-input seed {seed[:8]}...): {errors[:3]}")
        temporary = Path(scratch) / "run.json"
        temporary.write_text(json.dumps(found))
        temporary.replace(cache)
    return found


def reference_records(root, module_id, cache_dir, kernel_name, seed=FIXED_SEED, base_seed=FIXED_SEED):
    """`{grade id: records}` of the answer key: the source notebook run with its solutions and
    hidden-input seed `seed` (a variant's, `hidden_inputs.seed`; by default the seed of runs outside
    grading), each record marked `informative` or
    not (`mark_informative`); cached in `cache_dir` under the digest of what it is made from
    (`grading_cache.key`). Which records the test computes itself comes from a second run, of the
    release's stubs (`release_run`), made once per module with `base_seed` and compared with the
    answer key of `base_seed`: it holds for every variant whose records are at the same places (the
    same `layout`); a variant whose records are elsewhere gets a release run of its own."""
    cache = Path(cache_dir) / f"{module_id}-{grading_cache.key(root, module_id, seed, base_seed)}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    found = _cached_run(root, module_id, cache_dir, kernel_name, seed, release=False)
    base = found if seed == base_seed else _cached_run(root, module_id, cache_dir, kernel_name, base_seed,
                                                       release=False)
    if layout(base) != layout(found):
        base, base_seed = found, seed
    stubs = _cached_run(root, module_id, cache_dir, kernel_name, base_seed, release=True)
    mark_informative(found, stubs, base)
    with tempfile.NamedTemporaryFile("w", dir=cache.parent, suffix=".tmp", delete=False) as temporary:
        temporary.write(json.dumps(found))
    Path(temporary.name).replace(cache)
    return found
