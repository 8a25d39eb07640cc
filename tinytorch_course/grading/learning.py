"""What each catalogued mistake (`mistakes`) records at its exercise's test cells, learned by running it.

For an exercise E and a hidden-input seed (a variant's, `hidden_inputs.seed`), `learned` runs the
source notebook once per mistake of E, with that mistake in E's solution cell, cut after E's own
test cells (`through_own_tests`): a process runs the notebook from the top up to E (then on to the
next exercise to learn) and each mistake's cells in a fork of itself (`ForkedCells`,
`forked_cells.py`). What it keeps, for each mistake and each of E's test cells, is the cell's
records and the error it raised: `{mistake key: {grade id: {"records": [...], "error": class name or
None, "message": its text}}}`, where a mistake's key is `"<cell>:<what>"`. An entry is cached like
the answer keys, under the digest of what it is made from (the notebook, the package, the grading
code, this module and its runner, the exercise's mistakes as the catalogue file gives them, but
their `says`, and the seed), and made lazily: grading learns an exercise's mistakes only when a
submission failed one of its tests (`diagnose.explain`). Concurrent workers wait for
each other on a lock: one learns, the others read. `write_kit_file` keeps what the learner's kit may
know of them: how each fails the visible tests.
"""
import fcntl
import functools
import hashlib
import json
import os
from pathlib import Path
import subprocess
import sys
import tempfile

import nbformat

from tinytorch.testing import FIXED_SEED, HIDDEN_SEED_ENV

from . import grading_cache, verdicts
from .. import notebooks
from ..build import hidden_names, mistakes

HERE = Path(__file__).resolve().parent
KIT_FILE = "mistakes/kit.json"  # made by ./course build, shipped in the learner's kit: what `./learn check` says


def mistake_key(mistake):
    return f"{mistake.cell}:{mistake.what}"


def with_cell_replacement(notebook, grade_id, old, new):
    """A copy of `notebook` whose cell `grade_id` has `old` replaced by `new` (exactly once)."""
    notebook = nbformat.from_dict(notebook)
    cell = notebooks.cells_by_id(notebook)[grade_id]
    count = cell.source.count(old)
    if count != 1:
        raise ValueError(f"{old!r} occurs {count} times in cell {grade_id}; it must occur once")
    cell.source = cell.source.replace(old, new)
    return notebook


def exercise_ids(notebook):
    """The grade ids of the notebook's solution cells (its exercises)."""
    return {notebooks.grade_id(c) for c in notebook.cells if notebooks.is_solution(c)}


def exercise_of(test_cell, exercises):
    """The exercise whose tests `test_cell` is (its grade id is `<exercise>_...`), or None."""
    gid = notebooks.grade_id(test_cell)
    return max((e for e in exercises if gid.startswith(e + "_")), key=len, default=None)


def test_cells_of(notebook, exercise):
    """The grade ids of the exercise's test cells, in order."""
    exercises = exercise_ids(notebook)
    return [notebooks.grade_id(c) for c in notebook.cells
            if notebooks.is_test(c) and exercise_of(c, exercises) == exercise]


@functools.lru_cache(maxsize=None)  # a notebook's cells are parsed once, not once per mutant
def bound_and_read(source):
    """The global names a code cell binds, and those it (or a function it defines) reads without
    binding them itself (`build.hidden_names`' analysis, the one `./course build` checks reads with)."""
    tree = hidden_names.parse(source)
    bound = hidden_names.global_bindings(tree)
    return frozenset(bound), frozenset(set(hidden_names.global_reads(tree)) - bound)


def cell_names(notebook):
    """`[(bound, read)]` of each cell (nothing for markdown and for cells graded runs skip)."""
    skipped = notebooks.skipped_when_graded(notebook)
    nothing = (frozenset(), frozenset())
    return [bound_and_read(c.source) if c.cell_type == "code" and c.source not in skipped else nothing
            for c in notebook.cells]


def depends_on(source):
    """`{exercise: exercises}`: the exercises whose solution cells bind a name that the exercise's
    own cells (solution and tests) read, directly or through the cells that bound what they read."""
    names = cell_names(source)
    direct, last_binder = [], {}
    for index, (bound, read) in enumerate(names):
        direct.append({last_binder[n] for n in read if n in last_binder})
        last_binder.update(dict.fromkeys(bound, index))
    exercises = exercise_ids(source)
    solution_at = {notebooks.grade_id(c): i for i, c in enumerate(source.cells) if notebooks.is_solution(c)}
    found = {}
    for exercise in exercises:
        todo = [solution_at[exercise]] + [i for i, c in enumerate(source.cells) if notebooks.is_test(c)
                                          and exercise_of(c, exercises) == exercise]
        seen = set()
        while todo:
            index = todo.pop()
            if index not in seen:
                seen.add(index)
                todo.extend(direct[index])
        found[exercise] = {e for e, i in solution_at.items() if i in seen and e != exercise}
    return found


def reaches(depends):
    """`depends` (`depends_on`) closed over exercises: a mistake in A can fail the tests of C that uses
    A, and grading names no mistake of an exercise B that uses a failing C."""
    found = {exercise: set(uses) for exercise, uses in depends.items()}
    while True:
        grown = {exercise: uses.union(*(found[u] for u in uses)) for exercise, uses in found.items()}
        if grown == found:
            return found
        found = grown


def through_own_tests(notebook, cell_id):
    """The cells a mistake of exercise `cell_id` is first judged by: `notebook` cut after the
    exercise's last test cell (`<cell_id>_visible`, `<cell_id>_hidden`, ...), without the test cells
    of earlier exercises, except those that last bound a name a kept cell reads."""
    exercises = exercise_ids(notebook)
    own = [i for i, c in enumerate(notebook.cells)
           if notebooks.is_test(c) and exercise_of(c, exercises) == cell_id]
    cut = nbformat.from_dict(notebook)
    if not own:
        return cut
    cut.cells = cut.cells[:own[-1] + 1]
    names = cell_names(cut)
    keep = {i for i, c in enumerate(cut.cells) if not notebooks.is_test(c) or exercise_of(c, exercises) == cell_id}
    while True:
        last_binder, needed = {}, set()
        for i, (bound, read) in enumerate(names):
            if i in keep:
                needed.update(last_binder[n] for n in read if n in last_binder)
            last_binder.update(dict.fromkeys(bound, i))
        if needed <= keep:
            break
        keep |= needed
    cut.cells = [c for i, c in enumerate(cut.cells) if i in keep]
    return cut


class ForkedCells:
    """A process that has run the first cells of a notebook (`shared`) once, as the grading kernel
    runs them, and runs what follows them in a fork of itself (`forked_cells.py`): each run then
    costs only its own cells, not a kernel's start and the shared cells again. `env`: more
    environment variables for it (the hidden-input seed)."""

    def __init__(self, shared, workdir, timeout=120, env=None):
        self.shared, self.workdir, self.runs = shared, Path(workdir), 0
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(HERE / "forked_cells.py"), str(timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=self.workdir,
            env={**os.environ, "NBGRADER_EXECUTION": "autograde", **(env or {})})
        self.shared_errors, self.shared_records = self._run(shared, fork=False)

    def _run(self, cells, fork):
        """`(errors, records)` of the code cells of `cells` (by index; those graded runs skip are not run)."""
        skipped = notebooks.skipped_when_graded(nbformat.v4.new_notebook(cells=cells))
        ran = [i for i, c in enumerate(cells)
               if c.cell_type == "code" and c.source.strip() and c.source not in skipped]
        folder = self.workdir / f"run-{self.runs}"
        self.runs += 1
        folder.mkdir()
        request = {"cells": [verdicts.split_hidden(cells[i].source) for i in ran],
                   "records": str(folder), "fork": fork}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            log = (self.workdir / "stderr.log").read_text()[-3000:]
            raise RuntimeError(f"tinytorch_course/grading/forked_cells.py ended (exit status {self.process.wait()}):\n{log}")
        errors = dict(zip(ran, json.loads(answer)["errors"]))
        records = {i: verdicts.read_new_records(folder / f"{n}.jsonl", 0)[0] for n, i in enumerate(ran)}
        return errors, records

    def advance(self, cells):
        """Run `cells` after the shared cells, in this process: from now on they are shared too."""
        count = len(self.shared)
        errors, records = self._run(cells, fork=False)
        self.shared = list(self.shared) + list(cells)
        self.shared_errors.update({count + i: e for i, e in errors.items()})
        self.shared_records.update({count + i: r for i, r in records.items()})

    def execute(self, notebook):
        """`(executed notebook, cell records)` for `notebook`, the shared cells followed by others, as
        the grading kernel would give them (each cell's error as its error output)."""
        count = len(self.shared)
        assert [c.source for c in notebook.cells[:count]] == [c.source for c in self.shared]
        errors, records = self._run(notebook.cells[count:], fork=True)
        errors = {**self.shared_errors, **{count + i: e for i, e in errors.items()}}
        records = {**self.shared_records, **{count + i: r for i, r in records.items()}}
        executed = nbformat.from_dict(notebook)
        for index, cell in enumerate(executed.cells):
            if cell.cell_type == "code":
                error = errors.get(index)
                cell.outputs = ([nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[])]
                                if error else [])
        return executed, records

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def first_error(cell):
    """The first error output of an executed cell, or None."""
    return next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)


def cell_error(cell):
    """The class name of the first error an executed cell shows, or None."""
    error = first_error(cell)
    return error.ename if error else None


def outcomes(executed, cell_records, grade_ids):
    """`{grade id: {"records": [...], "error": name or None, "message": its text}}` of the given test
    cells of an executed notebook."""
    records = verdicts.records_by_grade_id(executed, cell_records)
    cells = notebooks.cells_by_id(executed)
    return {gid: {"records": records.get(gid, []), "error": cell_error(cells[gid]),
                  "message": getattr(first_error(cells[gid]), "evalue", None)}
            for gid in grade_ids if gid in cells}


def _learn(source, found, seed, workdir):
    """`{exercise: {mistake key: outcomes}}` of the mistakes `found` (`{exercise: [Mistake]}`), run with
    hidden-input `seed`: one process runs the notebook from the top, up to each exercise in turn, and
    runs each of its mistakes in a fork, with the cells of the exercise's `through_own_tests` after it."""
    at = {notebooks.grade_id(c): i for i, c in enumerate(source.cells) if notebooks.is_solution(c)}
    made, runner, done = {}, None, 0
    try:
        for exercise in sorted(found, key=at.get):
            if runner is None:
                runner = ForkedCells(source.cells[:at[exercise]], workdir, env={HIDDEN_SEED_ENV: seed})
            else:
                runner.advance(source.cells[done:at[exercise]])
            done = at[exercise]
            own, made[exercise] = test_cells_of(source, exercise), {}
            for mistake in found[exercise]:
                cut = through_own_tests(with_cell_replacement(source, exercise, mistake.old, mistake.new), exercise)
                start = next(i for i, c in enumerate(cut.cells) if notebooks.grade_id(c) == exercise)
                notebook = nbformat.v4.new_notebook(cells=source.cells[:done] + cut.cells[start:])
                made[exercise][mistake_key(mistake)] = outcomes(*runner.execute(notebook), own)
    finally:
        if runner is not None:
            runner.close()
    return made


def learned(root, module_id, cache_dir, seed, exercises):
    """`{exercise: {mistake key: {grade id: {"records", "error", "message"}}}}`: what each catalogued
    mistake of each of `exercises` records at its exercise's test cells with hidden-input `seed`;
    cached in `cache_dir`, an entry per exercise, those not there yet learned together (`_learn`)."""
    found = {}
    for mistake in mistakes.catalogue(root, module_id):
        if mistake.cell in exercises and mistake.runnable:  # one named from a cluster: by its signature
            found.setdefault(mistake.cell, []).append(mistake)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    code = "".join((HERE / name).read_text() for name in ("learning.py", "forked_cells.py"))
    entries = {}
    for exercise, listed in found.items():
        catalogue = json.dumps([[m.cell, m.what, m.old, m.new] for m in listed])  # not `says`: rewording relearns nothing
        key = grading_cache.key(root, module_id, "mistakes", catalogue, code, seed, exercise)
        entries[exercise] = cache_dir / f"{module_id}-{exercise}-{key}.json"
    with open(cache_dir / f"{module_id}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be learning the same entries: wait for it
        missing = {exercise: found[exercise] for exercise, path in entries.items() if not path.is_file()}
        if missing:
            source = notebooks.read(notebooks.notebook_path(root, "modules", module_id))
            with tempfile.TemporaryDirectory(prefix=f"{module_id}-", dir=cache_dir) as scratch:
                for exercise, made in _learn(source, missing, seed, scratch).items():
                    temporary = Path(scratch) / f"{exercise}.json"
                    temporary.write_text(json.dumps(made))
                    temporary.replace(entries[exercise])
    return {exercise: json.loads(entries[exercise].read_text()) if exercise in entries else {}
            for exercise in exercises}


# ------------------------------------------------------------------ what the learner's kit ships


def kit_digest(root, module_id):
    """What a module's part of the kit's file is made from: the notebook, the checks' code, the
    catalogue (`says` included) and the code that learns it."""
    found = [list(m) for m in mistakes.catalogue(root, module_id)]
    parts = [notebooks.notebook_path(root, "modules", module_id).read_text(),
             (Path(root) / "tinytorch" / "testing.py").read_text(), json.dumps(found),
             (HERE / "learning.py").read_text(), (HERE / "forked_cells.py").read_text()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _same(outcome, other):
    """Whether two learnings of one test cell recorded the same (NaN included)."""
    return json.dumps(outcome, sort_keys=True) == json.dumps(other, sort_keys=True)


def visible_failures(root, module_id, cache_dir):
    """`[{"says", "visible": {grade id: None or [error class, message]}}]`: how each catalogued mistake
    that a visible test catches fails the visible test cells of its exercise, outside grading (the
    fixed seed). Only the visible cells, never the records, the hidden cells or the mistake's code;
    left out: a mistake whose visible failures are another's of its exercise (it cannot be told apart),
    and one whose visible failures change from run to run (it draws from an unseeded generator: a
    learner's run never shows the same), found by learning the module a second time."""
    source = notebooks.read(notebooks.notebook_path(root, "modules", module_id))
    cells = notebooks.cells_by_id(source)
    catalogue = mistakes.catalogue(root, module_id)
    visible, candidates = {}, {}
    for exercise in sorted(exercise_ids(source)):
        visible[exercise] = [g for g in test_cells_of(source, exercise)
                             if notebooks.HIDDEN_MARKERS[0] not in cells[g].source]
        candidates[exercise] = [m for m in catalogue if m.cell == exercise and m.hidden_only is None and m.runnable]
    exercises = [e for e in visible if visible[e] and candidates[e]]  # the only ones learned, twice
    every = learned(root, module_id, cache_dir, FIXED_SEED, exercises)
    with tempfile.TemporaryDirectory(prefix="learning-again-") as again:
        repeated = learned(root, module_id, again, FIXED_SEED, exercises)
    found = []
    for exercise in exercises:
        outcome = every[exercise]
        caught = [m for m in candidates[exercise] if all(
            _same(outcome[mistake_key(m)][g], repeated[exercise][mistake_key(m)][g]) for g in visible[exercise])]
        shown = [{g: outcome[mistake_key(m)][g]["error"] and [outcome[mistake_key(m)][g]["error"],
                                                              outcome[mistake_key(m)][g]["message"]]
                  for g in visible[exercise]} for m in caught]
        found += [{"says": m.says or m.what, "visible": fails} for m, fails in zip(caught, shown)
                  if any(fails.values()) and shown.count(fails) == 1]
    return found


def write_kit_file(root, cache_dir, log=print):
    """Write `KIT_FILE`: `{module: {"digest", "mistakes": visible_failures}}`, keeping each module's
    entry whose `kit_digest` is unchanged."""
    path = Path(root) / KIT_FILE
    previous, made = json.loads(path.read_text()) if path.is_file() else {}, {}
    for module_id in notebooks.module_ids(root):
        digest = kit_digest(root, module_id)
        if previous.get(module_id, {}).get("digest") == digest:
            made[module_id] = previous[module_id]
        else:
            made[module_id] = {"digest": digest, "mistakes": visible_failures(root, module_id, cache_dir)}
            log(f"learned what {module_id}'s catalogued mistakes show in its visible tests")
    path.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
