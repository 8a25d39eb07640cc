"""Runs inside the grading kernel: notices a submission that patches what the tests rely on.

`install` (called by `kernel_main` before any notebook cell runs) records every attribute of
builtins, math, numpy and every numpy module loaded by then (np.testing, np.linalg, np.random and
the internal modules whose functions they call, e.g. the one where `allclose` looks up `isclose`),
the reference `tinytorch` package and its classes, plus the code objects of their Python
functions. After every cell it checks that each one is still the same object; the first change of
each is recorded with the cell that made it, so patching and later restoring is caught too. It
also checks that names bound to the test helpers (`tinytorch.testing`) or to these modules in the
notebook keep their binding, that the notebook's `__builtins__` is still the builtins module, that
`tinytorch` is the reference package, and that `sys.modules` still holds these modules and this
one. Each finding is appended to the grader's records right after the cell that made it (so a
later cell cannot take it back, nor a replaced `report`); `report()`, which the grader adds as a
last cell, appends a closing record, and the grader flags the submission if none arrives.

It lives in the same process as the submission, so code written against it can switch it off
first (remove its hook, patch its code, write a clean record itself): it is advisory. Grades never
depend on it (see `verdicts`); it flags for a person to look at.
"""
import builtins
import importlib
import json
import math
import os
import pkgutil
import sys
import types

# Names that IPython and ipykernel themselves swap in and out of builtins around each cell.
_IPYTHON_BUILTINS = {"exit", "quit", "input", "get_ipython", "display", "_", "__", "___", "help",
                     "copyright", "credits", "license", "__IPYTHON__"}


def _modules():
    import numpy
    import numpy.linalg
    import numpy.random
    import numpy.testing
    import tinytorch

    found = [builtins, math, numpy, numpy.testing, numpy.linalg, numpy.random, tinytorch]
    found += [m for name, m in sorted(sys.modules.items())
              if name.startswith("numpy.") and isinstance(m, types.ModuleType) and m not in found]
    for info in pkgutil.iter_modules(tinytorch.__path__, "tinytorch."):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:  # a module that needs one the graded notebook exports
            pass
    return found


class Guard:
    def __init__(self, reference_prefix):
        self.reference_prefix = reference_prefix
        self.modules = _modules()
        self.entries = []  # (label, namespace dict, name, object)
        for module in self.modules:
            for name, value in list(vars(module).items()):
                if module is builtins and name in _IPYTHON_BUILTINS:
                    continue
                self.entries.append((module.__name__, vars(module), name, value))
                if isinstance(value, type) and getattr(value, "__module__", "").startswith("tinytorch"):
                    for attr, member in list(vars(value).items()):
                        self.entries.append((f"{module.__name__}.{name}", vars(value), attr, member))
        self.code = [(label, name, value, value.__code__, value.__defaults__, value.__kwdefaults__)
                     for label, _, name, value in self.entries if isinstance(value, types.FunctionType)]
        import tinytorch.testing

        self.helpers = {name: value for name, value in vars(tinytorch.testing).items()
                        if not name.startswith("_") and callable(value)}
        self.protected_modules = {id(m): m for m in self.modules}
        self.own_module = sys.modules[__name__]
        self.bound = {}  # notebook name -> the protected object it was bound to
        self.findings = {}  # what changed -> the execution count of the cell that changed it
        self.unreported = []  # findings not yet appended to the records
        self._original = (json.dumps, os.write)
        target = os.environ.get("TINYTORCH_RECORDS", "")
        self._records = int(target[3:]) if target.startswith("fd:") else None

    def _note(self, what, cell):
        if what not in self.findings:
            self.findings[what] = cell
            self.unreported.append((what, cell))

    def check(self, user_ns, cell):
        for label, namespace, name, value in self.entries:
            if namespace.get(name, value) is not value:
                self._note(f"replaced {label}.{name}", cell)
        for label, name, value, code, defaults, kwdefaults in self.code:
            if (value.__code__ is not code or value.__defaults__ is not defaults
                    or value.__kwdefaults__ is not kwdefaults):
                self._note(f"changed the code of {label}.{name}", cell)
        for name, value in list(user_ns.items()):
            pristine = self.helpers.get(name)
            if pristine is None and id(value) in self.protected_modules:
                pristine = value
            if pristine is not None and value is pristine:
                self.bound[name] = pristine
        for name, pristine in self.bound.items():
            if user_ns.get(name, pristine) is not pristine:
                self._note(f"redefined {name!r}, which the tests use", cell)
        bound_builtins = user_ns.get("__builtins__", builtins)
        if bound_builtins is not builtins and bound_builtins is not vars(builtins):
            self._note("rebound __builtins__ in the notebook", cell)
        modules = sys.modules
        for module in self.modules + [self.own_module]:
            if modules.get(module.__name__) is not module:
                self._note(f"replaced the module {module.__name__} in sys.modules", cell)
        tinytorch = modules.get("tinytorch")
        location = getattr(tinytorch, "__file__", "") or ""
        if not location.startswith(self.reference_prefix):
            self._note(f"imports tinytorch from {location!r}, not the reference package", cell)

    def write(self, closing=False):
        """Append the findings not yet reported (and, when `closing`, the closing record)."""
        if self._records is None or not (self.unreported or closing):
            return
        dumps, write = self._original
        line = dumps({"kind": "guard", "findings": self.unreported, "closing": closing})
        write(self._records, line.encode() + b"\n")
        self.unreported = []


_guard = None


def install(shell, reference_prefix):
    """Snapshot the pristine objects and check them after every cell of `shell` (an IPython shell)."""
    global _guard
    _guard = Guard(reference_prefix)

    def after_cell(result):
        _guard.check(shell.user_ns, result.execution_count)
        _guard.write()

    _guard.after_cell = after_cell
    shell.events.register("post_run_cell", after_cell)


def report():
    if _guard is None:
        raise RuntimeError("the grading guard is not installed")
    from IPython import get_ipython

    shell = get_ipython()
    if _guard.after_cell not in shell.events.callbacks["post_run_cell"]:
        _guard._note("removed the grader's integrity check from IPython's hooks", "end")
    _guard.check(shell.user_ns, "end")
    _guard.write(closing=True)
