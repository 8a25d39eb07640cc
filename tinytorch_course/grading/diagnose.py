"""What a failed test cell tells the learner and the instructor: a known mistake, or a kind of difference.

For each exercise with a failing test cell, the learner's records at the exercise's test cells are
matched against what each catalogued mistake of the exercise records there (`learning.learned`, with
the learner's own hidden inputs): a mistake is named only when every record of every test cell of
the exercise matches it (each compared as `verdicts.judge_record` compares a hidden record with the
answer key's: the mistake's recorded result in the key's place) and each cell raised the same error
class. A mistake in an earlier exercise that this one uses may change its records, even into those
of one of its own catalogued mistakes: so an exercise that uses a failing one
(`learning.depends_on`) names nothing (unless the failing one comes later in the notebook and uses
this one: its tests may fail because of this exercise's mistake). Where nothing is named, the
feedback says which check failed and the kind of difference from the answer key (`difference`):
"missing" (the checks did not run as the key's), "error", "shape", "dtype" or "values", worded
without any value a hidden test computed. `signature` is a short digest of how a cell's records
differ from the answer key's, in terms no hidden input decides (`relation`): one mistake has one
signature in every variant of the hidden inputs (a cluster of one unknown mistake, for the class
report; but for a mistake that shows only in some random cases of a loop, which may fall at other
places of the cell in another variant), and a catalogued mistake named from a cluster
(`Mistake.signature`: no code to learn) is named by it.
"""
import hashlib
import json
from fractions import Fraction
from pathlib import Path

import nbformat
import numpy as np

from tinytorch.testing import ErrorValue, decoded

from . import learning, verdicts
from .. import notebooks
from ..build import mistakes
from ..kit.nbcells import heading_before


def own_records(reference, records):
    """The learner's records placed in the files the answer key's records name (as `judge_cell`)."""
    files = {place[0] for _, place in map(verdicts.record_key, reference) if place}
    return [entry for entry in records if (verdicts.record_key(entry)[1] or ("",))[0] in files]


def same_outcome(expected, got):
    """A learner's cell (`{"records", "error"}`) matches a mistake's: the same error class, the same
    checks in the same places, each result equal to the mistake's."""
    want, have = expected["records"], own_records(expected["records"], got["records"])
    return (expected["error"] == got["error"] and len(want) == len(have)
            and all(verdicts.record_key(w) == verdicts.record_key(h) and verdicts.judge_record(dict(w, kind="record"), h)[0]
                    for w, h in zip(want, have)))


VALUES_DIFFER = "the result's values differ from the answer key's"


def _error_name(value):
    return str(value.classes[0])[:80] if isinstance(value, ErrorValue) else None  # named by the submission


STUB_ERROR = "NotImplementedError"  # what the release's stubs raise
UNFINISHED = ("unfinished", f"the code it tests is not written yet (it raises {STUB_ERROR}, as the stub does)")


def _kind_of(expected, got_entry):
    """`(kind, words)` of one failed check: how the learner's result differs from the key's."""
    kind = expected["kind"]
    got = decoded(got_entry.get("got"))
    if _error_name(got) == STUB_ERROR:
        return UNFINISHED
    if kind == "true":
        return "values", "a property the answer key's result has does not hold for yours"
    if kind == "raises":
        want_error = expected["expected"]
    else:
        want = decoded(expected.get("want" if kind in ("equal", "close") else "got"))
        want_error = _error_name(want)
    if want_error or _error_name(got):
        if _error_name(got) == want_error:
            return "error", f"raised {want_error} as the answer key did, but its message does not say what it should"
        return "error", f"raised {_error_name(got) or 'no error'} where the answer key raised {want_error or 'none'}"
    if type(got) is not type(want) and not all(isinstance(v, (int, float)) for v in (got, want)):
        return "values", f"the result is a {type(got).__name__} where the answer key's is a {type(want).__name__}"
    if hasattr(got, "shape") and hasattr(want, "shape") and got.shape != want.shape:
        return "shape", "the result's shape differs from the answer key's"
    if hasattr(got, "dtype") and hasattr(want, "dtype") and got.dtype != want.dtype:
        return "dtype", f"the result's dtype is {got.dtype} where the answer key's is {want.dtype}"
    return "values", VALUES_DIFFER


def difference(reference, outcome):
    """`(kind, words)`: how a cell's `outcome` (`{"records", "error"}`) differs from the answer key's
    records `reference`; `(None, "")` where its own records match (it failed only with its exercise)."""
    if outcome["error"] == STUB_ERROR:
        return UNFINISHED
    have = own_records(reference, outcome["records"])
    for expected, got in zip(reference, have):
        if verdicts.record_key(expected) != verdicts.record_key(got):
            return "missing", "its checks did not run as the answer key's did"
        try:
            if not verdicts.judge_record(expected, got)[0]:
                return _kind_of(expected, got)
        except Exception:  # noqa: BLE001  (records are untrusted data)
            return "values", "a result could not be read"
    if len(have) < len(reference):
        if outcome["error"]:
            return "error", f"raised {outcome['error'][:80]} where the answer key raised none"
        return "missing", "some of its checks did not run"
    if len(have) > len(reference):
        return "missing", "it ran more checks than the answer key did"
    return None, ""


def _value_relation(want, got):
    """How a result's values relate to the answer key's, whatever the inputs: "zeros", "nan", "transposed",
    a constant simple ratio ("x2", "x1/2", "x-1", ...), else "values" (always for a single number)."""
    try:
        want, got = np.asarray(want, dtype=float), np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return "values"
    if want.ndim == 2 and got.shape == want.shape[::-1] and np.allclose(got, want.T, equal_nan=True):
        return "transposed"
    if got.shape != want.shape:
        return "shape"
    if np.isnan(got).any() and not np.isnan(want).any():
        return "nan"
    if want.size < 2:  # one number: any relation would be a coincidence of the inputs
        return "values"
    finite = np.isfinite(want) & np.isfinite(got)
    if not got[finite].any():
        return "zeros"
    nonzero = finite & (want != 0)
    ratios = got[nonzero] / want[nonzero]
    if not (got[finite & (want == 0)] == 0).all() or not np.allclose(ratios, ratios[0], rtol=1e-5, atol=0):
        return "values"
    simple = Fraction(float(ratios[0])).limit_denominator(4)
    if abs(simple.numerator) > 4 or not np.isclose(float(simple), ratios[0], rtol=1e-5, atol=0):
        return "values"
    return f"x{simple}" if len(ratios) > 1 else "values"


def relation(expected, got_entry):
    """One record's part of a signature: "same" where it passes the answer key's check `expected`,
    else the kind of difference in words (`_kind_of`: error classes, dtypes, types) and, for values,
    `_value_relation`."""
    if verdicts.record_key(expected) != verdicts.record_key(got_entry):
        return "missing"
    try:
        if verdicts.judge_record(expected, got_entry)[0]:
            return "same"
        kind, words = _kind_of(expected, got_entry)
        if kind != "shape" and words != VALUES_DIFFER:
            return words
        return _value_relation(decoded(expected.get("want" if expected["kind"] in ("equal", "close") else "got")),
                               decoded(got_entry.get("got")))
    except Exception:  # noqa: BLE001  (records are untrusted data)
        return "unreadable"


def signature(reference, outcome):
    """12 hex digits of a cell's `outcome` against the answer key's records `reference`: its error class,
    whether it has fewer or more records, and the set of (place, `relation`) of its records that fail
    (a set: which of a loop's cases fail, and how many, depends on the inputs); equal for every passing
    cell, and for one mistake in any variant of the hidden inputs unless the places it fails at do."""
    have = own_records(reference, outcome["records"])
    failing = {json.dumps([verdicts.record_key(w), relation(w, h)], default=repr) for w, h in zip(reference, have)}
    text = json.dumps([outcome["error"], int(np.sign(len(have) - len(reference))),
                       sorted(failing - {json.dumps([verdicts.record_key(w), "same"], default=repr) for w in reference})])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def heading(source, indices, grade_id):
    """The heading above the cell `grade_id` (an exercise's solution cell: "Exercise 3 — numel"), or ""."""
    return heading_before(source, indices[grade_id]).replace("`", "") if grade_id in indices else ""


def diagnose(source, executed, cell_records, reference, judged, learned, catalogue):
    """`(checks, sentences)` of an executed submission.

    `source`: the module's source notebook (the course's: exercises and headings come from it, not
    from the submission); `reference`: the answer key's records of the learner's variant; `judged`:
    `verdicts.judge`'s verdicts; `learned(exercises)`: `learning.learned` for the learner's variant,
    called once, with the exercises that have a failing cell other than the stub's error and no failing
    exercise upstream;
    `catalogue`: the module's mistakes.
    `checks`: `{grade id: {"passed", "mistakes", "difference", "signature"}}` for every graded test
    cell; `sentences`: `{grade id: what the feedback says}` for each failing cell."""
    exercises = learning.exercise_ids(source)
    cells = notebooks.cells_by_id(source)
    indices = {notebooks.grade_id(c): i for i, c in enumerate(source.cells) if notebooks.grade_id(c)}
    records = verdicts.records_by_grade_id(executed, cell_records)
    outcomes = {gid: {"records": records[gid], "error": learning.cell_error(cell)}
                for gid, cell in notebooks.cells_by_id(executed).items() if gid in records}
    says = {learning.mistake_key(m): m.says or m.what for m in catalogue}
    ran = notebooks.cells_by_id(executed)
    exercise_of = {gid: learning.exercise_of(cells[gid], exercises) if gid in cells else None for gid in outcomes}
    kinds = {gid: (None, "") if judged.get(gid) and judged[gid].passed
             else difference(reference.get(gid, []), outcome) for gid, outcome in outcomes.items()}
    # not begun: the exercise's own cell or one of its tests met the stub's error (its other tests then
    # fail for want of what it defines, a NameError, or of what an earlier test cell defines)
    stubs = ({e for e in exercises if e in ran and learning.cell_error(ran[e]) == STUB_ERROR}
             | {exercise_of[gid] for gid, kind in kinds.items() if kind == UNFINISHED})
    checks, sentences, words, failing = {}, {}, {}, {}
    for gid, outcome in outcomes.items():
        kind, words[gid] = UNFINISHED if kinds[gid][0] and exercise_of[gid] in stubs else kinds[gid]
        checks[gid] = {"passed": bool(judged.get(gid) and judged[gid].passed), "mistakes": [], "difference": kind,
                       "signature": signature(reference.get(gid, []), outcome)}
        if not checks[gid]["passed"] and kind is not None:
            failing.setdefault(exercise_of[gid], []).append(gid)
    depends = learning.depends_on(source)
    failed = {learning.exercise_of(cells[gid], exercises) for gid, check in checks.items()
              if not check["passed"] and gid in cells}
    upstream = {exercise: sorted(c for c in depends.get(exercise, set()) & failed  # what may have failed it
                                 if indices[c] < indices[exercise] or exercise not in depends[c])
                for exercise in failing if exercise}
    known = learned(sorted(e for e, up in upstream.items()  # a stub left as it is matches no mistake
                           if not up and any(checks[g]["difference"] != UNFINISHED[0] for g in failing[e])))
    for exercise, gids in failing.items():
        own = learning.test_cells_of(source, exercise) if exercise else []
        named = [] if exercise not in known or not own else [
            key for key, cell_outcomes in known[exercise].items()
            if all(g in outcomes and g in cell_outcomes and same_outcome(cell_outcomes[g], outcomes[g]) for g in own)]
        if not named and exercise and not upstream.get(exercise):  # one named from a cluster: by its signature
            named = [learning.mistake_key(m) for m in catalogue if m.signature and m.signature[0] in gids
                     and m.signature[1] == checks[m.signature[0]]["signature"]]
        where, first = heading(source, indices, exercise), (upstream.get(exercise) or [None])[0]
        upstream_heading = heading(source, indices, first)
        after = (f"; it uses {first}" + (f" ({upstream_heading})" if upstream_heading else "")
                 + ", whose tests fail too: look there first") if first else ""
        for gid in gids:
            checks[gid]["mistakes"] = list(named)
            test = "hidden test" if gid in cells and notebooks.HIDDEN_MARKERS[0] in cells[gid].source else "test"
            if named:
                sentences[gid] = ("This looks like a known mistake: " + " Or: ".join(says[k].rstrip(".") for k in named)
                                  + (f" (see {where})." if where else "."))
            else:
                under = where or heading(source, indices, gid)  # a test of no exercise: the part it is in
                sentences[gid] = (f"The {test} {gid}" + (f" of {under}" if under else "")
                                  + f" failed: {words[gid]}{after}.")
    return checks, sentences


def explain(root, module_id, cache_dir, seed, executed, cell_records, reference, judged):
    """`checks` (`diagnose`) of an executed submission of `module_id` graded with hidden-input `seed`,
    learning in `cache_dir`/mistakes; a `Feedback:` line is added under each failing test cell of
    `executed`, the notebook the feedback page shows."""
    checks, sentences = diagnose(
        notebooks.read(notebooks.notebook_path(root, "modules", module_id)), executed, cell_records, reference,
        judged, lambda exercises: learning.learned(root, module_id, Path(cache_dir) / "mistakes", seed, exercises),
        mistakes.catalogue(root, module_id))
    cells = notebooks.cells_by_id(executed)
    for gid, sentence in sentences.items():
        cells[gid].outputs.append(nbformat.v4.new_output("stream", name="stderr", text=f"Feedback: {sentence}\n"))
    return checks
