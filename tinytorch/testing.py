"""The checks that the notebooks' tests use (hand-written: not exported by nbdev).

Visible tests check a result against the value the exercise specifies and say what went wrong:

    assert_equal(got, want, what)        exact equality (tuples, ints, dtypes, shapes, array values)
    assert_close(got, want, what)        numbers and arrays within rtol/atol, shapes equal
    assert_raises(ErrorType, fn, *args)  fn(*args) raises ErrorType (message containing `match`)
    assert_true(condition, what)         a property that has no value to compare (a view, a flag)
    assert_passes(check, *args, what=)   check(*args) holds; its own AssertionError (gradcheck's:
                                         which input and element differ) is shown with `what`

Each failure names what was checked, the expected and actual values (shape, dtype, the first
element that differs) and, where given, a hint. Tensors are compared through `.numpy()`.

Hidden tests (run only when work is graded) hold no expected values at all: they `record` what
the learner's code returns on their inputs, and the grader compares it, outside the learner's
process, with what the answer key returns on the same inputs:

    record(value, what)                  a result to compare with the answer key's
    record_error(fn, *args, what=...)    the error fn(*args) raises (or the value it returns)

Hidden tests draw their random inputs from `hidden_rng(name)`: while graded, its seed comes from
the grader (each learner's own variant of the module, a new one each term); elsewhere it is fixed.

While nbgrader grades or validates a notebook, `being_graded()` is true: demos that only show
something (a training run, a timing table) run shorter then; no test depends on them. Timing cells
measure with `best_time(fn)`: the fastest of a few calls made after untimed warm-up calls.

When the grader sets $TINYTORCH_RECORDS, every check also appends one JSON line there: what was
checked, where, and the values as plain data. Elsewhere (your notebook, ./learn check) `record`
and `record_error` do nothing and the asserts only assert.
"""
import base64
import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import time

import numpy as np

__all__ = ["assert_equal", "assert_close", "assert_raises", "assert_true", "assert_passes", "record",
           "record_error", "being_graded", "best_time", "hidden_rng"]

MAX_SHOWN = 6  # elements of an array shown in a message

# ------------------------------------------------------------------ values as plain data


def to_plain(value):
    """`value` as JSON-ready data that keeps what equality needs: tuple vs list, array dtype and
    shape, numbers exactly. Tensors (anything with `.numpy()` and `.shape`) become arrays."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, np.generic):
        return _array_plain(np.asarray(value))
    for base, exact in _BUILTIN_COPIES:  # a subclass (with its own __eq__?): only the builtin value
        if isinstance(value, base):
            return exact(value)
    if isinstance(value, BaseException):
        return {"error": [c.__name__ for c in type(value).__mro__], "message": str(value)}
    if isinstance(value, (tuple, list)):
        items = [to_plain(v) for v in value]
        return {"tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {"dict": [[to_plain(k), to_plain(v)] for k, v in value.items()]}
    array = _array_of(value)
    if array is not None:
        return _array_plain(array)
    return {"object": type(value).__name__, "repr": re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))}


_BUILTIN_COPIES = [(str, lambda s: str.__getitem__(s, slice(None))), (int, lambda i: int.__add__(i, 0)),
                   (float, lambda f: float.__mul__(f, 1.0))]


def _array_plain(array):
    return {"array": {"dtype": array.dtype.str, "shape": list(array.shape),
                      "data": base64.b64encode(array.tobytes()).decode()}}


@dataclasses.dataclass(frozen=True)
class ObjectValue:
    """A decoded value of no plain type: compared by its type name and repr."""
    type: str
    repr: str


@dataclasses.dataclass(frozen=True)
class ErrorValue:
    """A decoded exception: its class and base class names, and its message."""
    classes: tuple
    message: str

    def __str__(self):
        return f"{self.classes[0]}({self.message!r})"


def _array_of(value):
    if isinstance(value, np.ndarray):
        return value
    if hasattr(type(value), "numpy") and hasattr(value, "shape"):  # a tensor
        value = value.detach() if hasattr(type(value), "detach") else value
        array = value.numpy()
        return np.asarray(array) if isinstance(array, (np.ndarray, np.generic)) else None
    return None


def from_plain(data):
    """The inverse of `to_plain`: tuples, lists, dicts and numpy arrays again; other objects
    and errors as `ObjectValue` and `ErrorValue`."""
    if isinstance(data, list):
        return [from_plain(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "tuple" in data:
        return tuple(from_plain(v) for v in data["tuple"])
    if "dict" in data:
        return {_hashable(from_plain(k)): from_plain(v) for k, v in data["dict"]}
    if "array" in data:
        spec = data["array"]
        raw = base64.b64decode(spec["data"])
        return np.frombuffer(raw, dtype=np.dtype(spec["dtype"])).reshape(spec["shape"]).copy()
    if "error" in data:
        return ErrorValue(tuple(data["error"]), data["message"])
    return ObjectValue(data["object"], data["repr"])


def _hashable(key):
    return repr(key) if isinstance(key, (dict, list, np.ndarray)) else key


def _is_array(value):
    return isinstance(value, np.ndarray)


def _numeric_array(value):
    """`value` (an array, a number, or nested lists/tuples of numbers) as an ndarray, or None."""
    if _is_array(value):
        return value
    if isinstance(value, (bool, int, float)):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            return None
        return array if array.dtype.kind in "biuf" else None
    return None


# ------------------------------------------------------------------ comparisons of plain data


def equal(got, want):
    """`(ok, why)`: exact equality of two decoded values (`from_plain`), as `assert_equal` means it."""
    if _is_array(got) or _is_array(want):
        g, w = _numeric_array(got), _numeric_array(want)
        if g is None or w is None:
            return False, f"expected {describe(want)}, got {describe(got)}"
        if g.shape != w.shape:
            return False, f"expected shape {w.shape}, got shape {g.shape}"
        same = (g == w) | (_nan(g) & _nan(w))
        if same.all():
            return True, ""
        return False, _first_difference(g, w, ~same)
    if type(got) is not type(want) and not (_number(got) and _number(want)):
        return False, f"expected {describe(want)}, got {describe(got)}"
    if isinstance(want, (tuple, list)):
        if len(got) != len(want):
            return False, f"expected {describe(want)} ({len(want)} items), got {describe(got)} ({len(got)} items)"
        for i, (g, w) in enumerate(zip(got, want)):
            ok, _ = equal(g, w)
            if not ok:
                return False, f"expected {describe(want)}, got {describe(got)} (item {i} differs)"
        return True, ""
    if isinstance(want, dict):
        if set(got) != set(want):
            return False, f"expected keys {sorted(map(str, want))}, got {sorted(map(str, got))}"
        for key in want:
            ok, why = equal(got[key], want[key])
            if not ok:
                return False, f"[{key!r}]: {why}"
        return True, ""
    if _number(want):
        ok = got == want or (isinstance(got, float) and isinstance(want, float)
                             and math.isnan(got) and math.isnan(want))
    else:
        ok = got == want
    return (True, "") if ok else (False, f"expected {describe(want)}, got {describe(got)}")


def close(got, want, rtol, atol):
    """`(ok, why)`: numbers or arrays of equal shape within `atol + rtol * |want|` (NaN matches NaN)."""
    g, w = _numeric_array(got), _numeric_array(want)
    if g is None or w is None:
        return False, f"expected numbers close to {describe(want)}, got {describe(got)}"
    if g.shape != w.shape:
        return False, f"expected shape {w.shape}, got shape {g.shape}"
    g, w = g.astype(np.float64), w.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        near = (np.abs(g - w) <= atol + rtol * np.abs(w)) | (g == w) | (_nan(g) & _nan(w))
    if near.all():
        return True, ""
    return False, _first_difference(g, w, ~near) + f" (rtol={rtol:g}, atol={atol:g})"


def same_error(got, want, match=None):
    """`(ok, why)`: `got` (decoded) is an error of `want`'s class or a subclass, with `match` in
    its message; `want` is an error class name or an `ErrorValue`."""
    name = want if isinstance(want, str) else want.classes[0]
    if not isinstance(got, ErrorValue):
        return False, f"expected {name} to be raised, but it returned {describe(got)}"
    if got.classes[0] == "NotImplementedError" != name:  # a stub, as `assert_raises` lets it through
        return False, f"expected {name}, got NotImplementedError: the exercise is not done yet"
    if name not in got.classes:
        return False, f"expected {name}, got {got.classes[0]}: {got.message}"
    if match is not None and match.lower() not in got.message.lower():
        return False, f"the {got.classes[0]} message {got.message!r} should mention {match!r}"
    return True, ""


def _nan(array):
    return np.isnan(array) if array.dtype.kind == "f" else np.zeros(array.shape, bool)


def _number(value):
    return isinstance(value, (bool, int, float))


def _first_difference(got, want, differs):
    index = tuple(int(i) for i in np.argwhere(differs)[0]) if got.ndim else ()
    where = f" at index {index}" if index else ""
    text = (f"{int(differs.sum())} of {differs.size} elements differ; first{where}: "
            f"expected {want[index].item()!r}, got {got[index].item()!r}")
    if got.dtype.kind in "biuf" and want.dtype.kind in "biuf":
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(got.astype(np.float64) - want.astype(np.float64))[differs]
        if np.isfinite(gap).any():
            text += f"; largest difference {np.nanmax(np.where(np.isfinite(gap), gap, np.nan)):.4g}"
    return text


def describe(value):
    """A short readable form of a decoded value, for messages."""
    if _is_array(value):
        flat = value.reshape(-1)
        shown = ", ".join(repr(v.item()) for v in flat[:MAX_SHOWN]) + (", ..." if flat.size > MAX_SHOWN else "")
        return f"{value.dtype} array of shape {value.shape} [{shown}]"
    if isinstance(value, ObjectValue):
        return value.repr
    text = str(value) if isinstance(value, ErrorValue) else repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def default_tolerance(want):
    """`(rtol, atol)` for `record`, from the answer key's value: float32 results are compared
    less tightly than float64 ones."""
    array = _numeric_array(want)
    if array is not None and array.dtype in (np.float16, np.float32):
        return 1e-4, 1e-5
    if array is not None and array.dtype == np.float64 and _is_array(want):
        return 1e-7, 1e-10
    return 1e-5, 1e-8


# ------------------------------------------------------------------ records for the grader


def _open_records():
    target = os.environ.get("TINYTORCH_RECORDS")
    if not target:
        return None
    if target.startswith("fd:"):
        return int(target[3:])
    return os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


_records = _open_records()


def _caller():
    """`[file name, line]` of the first frame outside this module (the test's own line)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals is globals():
        frame = frame.f_back
    if frame is None:
        return ["?", 0]
    return [os.path.basename(frame.f_code.co_filename), frame.f_lineno]


def _write(kind, what, **fields):
    if _records is None:
        return
    entry = {"kind": kind, "what": what, "loc": _caller(), **fields}
    os.write(_records, json.dumps(entry).encode() + b"\n")


# ------------------------------------------------------------------ the checks tests use


def _fail(what, why, hint):
    message = f"{what}: {why}" if what else why
    raise AssertionError(message + (f"\n  hint: {hint}" if hint else ""))


def _plain_pair(got, want):
    """Both values as plain data: exactly what the grader compares (`decoded`)."""
    try:
        got_plain = to_plain(got)
    except Exception as error:  # noqa: BLE001  (a broken tensor: say so, as a failed check)
        got_plain = {"error": [c.__name__ for c in type(error).__mro__],
                     "message": f"reading the result raised {type(error).__name__}: {error}"}
    return got_plain, to_plain(want)


def decoded(plain):
    """Plain data after the trip through JSON that a record makes, decoded (`from_plain`)."""
    return from_plain(json.loads(json.dumps(plain)))


def assert_equal(got, want, what=None, *, hint=None):
    """`got` equals `want` exactly: same tuple/list structure, numbers by value, arrays (and
    tensors) of the same shape with equal elements. Objects compare by type and repr."""
    got_plain, want_plain = _plain_pair(got, want)
    ok, why = equal(decoded(got_plain), decoded(want_plain))
    _write("equal", what, got=got_plain, want=want_plain, passed=ok)
    if not ok:
        _fail(what, why, hint)


def assert_close(got, want, what=None, *, rtol=1e-5, atol=1e-8, hint=None):
    """`got` is within `atol + rtol * |want|` of `want`, elementwise, and has the same shape
    (no broadcasting). Dtypes are not compared: check them with `assert_equal`."""
    got_plain, want_plain = _plain_pair(got, want)
    ok, why = close(decoded(got_plain), decoded(want_plain), rtol, atol)
    _write("close", what, got=got_plain, want=want_plain, rtol=rtol, atol=atol, passed=ok)
    if not ok:
        _fail(what, why, hint)


def assert_raises(error_type, fn, *args, match=None, what=None, hint=None, **kwargs):
    """`fn(*args, **kwargs)` raises `error_type` (or a subclass) whose message contains `match`
    (case-insensitive); returns the error. NotImplementedError (an unfinished exercise) passes
    through unchanged."""
    what = what or f"{getattr(fn, '__name__', 'the call')} raises {error_type.__name__}"
    try:
        returned = fn(*args, **kwargs)
    except NotImplementedError:
        if error_type is not NotImplementedError:
            raise
        returned, error = None, sys.exc_info()[1]
    except Exception as caught:  # noqa: BLE001
        returned, error = None, caught
    else:
        error = None
    got_plain = to_plain(error) if error is not None else _safe_plain(returned)
    ok, why = same_error(decoded(got_plain), error_type.__name__, match)
    _write("raises", what, got=got_plain, expected=error_type.__name__, match=match, passed=ok)
    if not ok:
        _fail(what, why, hint)
    return error


def assert_true(condition, what, *, hint=None):
    """A property with no value to compare (`t.storage is base.storage`): `condition` is true."""
    ok = bool(condition)
    _write("true", what, got=ok, passed=ok)
    if not ok:
        _fail(what, "expected it to hold, but it does not", hint)


def assert_passes(check, *args, what, hint=None, **kwargs):
    """`check(*args, **kwargs)` returns a true value. For a check that explains its own failure by
    raising AssertionError (`gradcheck`: which input, which element, both numbers): the failure
    names `what`, then that explanation, then the hint."""
    try:
        ok, why = bool(check(*args, **kwargs)), "expected a true result, but it returned a false one"
    except AssertionError as error:
        ok, why = False, str(error)
    _write("true", what, got=ok, passed=ok)
    if not ok:
        _fail(what, why, hint)


def _safe_plain(value):
    try:
        return to_plain(value)
    except Exception as error:  # noqa: BLE001
        return {"object": type(value).__name__, "repr": f"<unreadable: {type(error).__name__}>"}


def record(value, what, *, rtol=None, atol=None):
    """Hidden tests: `value` (a result of the learner's code), for the grader to compare with the
    answer key's on the same inputs. Floats are compared within rtol/atol (by default: looser
    for float32 than for float64). Does nothing outside grading."""
    if _records is not None:
        _write("record", what, got=_safe_plain(value), rtol=rtol, atol=atol)


def record_error(fn, *args, what, match=None, **kwargs):
    """Hidden tests: call `fn(*args, **kwargs)` and record the error it raises (its class, and
    whether the message contains `match`) or the value it returns."""
    try:
        value = fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (NotImplementedError included: a stub fails here)
        got = to_plain(error)
    else:
        got = _safe_plain(value)
    if _records is not None:
        _write("record_error", what, got=got, match=match)


HIDDEN_SEED_ENV = "TINYTORCH_HIDDEN_SEED"  # set by the grader, in the grading kernel only
FIXED_SEED = "tinytorch"  # outside grading: the same inputs at every run


def hidden_rng(name):
    """Hidden tests: a numpy Generator for the random inputs called `name` (unique in its notebook).
    While graded, its seed is the grader's (`$TINYTORCH_HIDDEN_SEED`: the learner's variant of the
    module) combined with `name`; elsewhere a fixed one."""
    seed = os.environ.get(HIDDEN_SEED_ENV) or FIXED_SEED
    digest = hashlib.sha256(f"{seed}\0{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def being_graded():
    """True while nbgrader autogrades or validates this notebook (it sets $NBGRADER_EXECUTION)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def best_time(fn, repeat=5, warmup=2):
    """Seconds that one call of `fn()` takes in a steady loop: the fastest of `repeat` timed calls,
    made after `warmup` untimed ones. First calls pay once for what later calls reuse (memory the
    process has not touched yet, cold caches, BLAS threads starting, lazy imports) and can take ten
    times as long: a timing that includes them measures the start-up, not the method."""
    for _ in range(warmup):
        fn()
    best = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best
