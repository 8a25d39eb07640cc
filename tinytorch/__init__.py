"""TinyTorch: a PyTorch-like framework built one notebook at a time (see modules/).

`import tinytorch as tt` gives PyTorch's top level: `tt.tensor`, `tt.Tensor`, `tt.zeros`, `tt.float32`,
`tt.no_grad`, `tt.manual_seed`, `tt.nn`, `tt.nn.functional`, `tt.optim`, `tt.utils.data`, and every
public name (`__all__`) of the modules exported so far. A name resolves, when first used, to the latest
exported module that defines it (`tt.tensor` is module 03's once that is exported, module 02's before);
a name of a module not exported yet raises AttributeError naming the notebook to finish.

Nothing is imported eagerly: a learner's package holds only the modules exported so far, and grading
copies this package without the later ones. This file is written by hand (nbdev leaves it alone).
"""
__version__ = "0.1.0"

import ast as _ast
import importlib as _importlib
import re as _re
import sys as _sys
from pathlib import Path as _Path

_HERE = _Path(__file__).resolve().parent
# The package modules that the notebooks export, in course order, with their notebook's number
# (a module's companion notebook, `NN_name_more.ipynb`, exports `<its module>_more` right after it).
_NOTEBOOK_OF = {"tensor_base": "01", "strides": "02", "autograd": "03", "autograd_more": "03", "nn": "04",
               "nn_more": "04", "training": "05", "attention": "06", "transformer": "07", "conv": "08",
               "conv_more": "08"}
# Names PyTorch keeps in torch.nn / torch.nn.functional that a later notebook defines (name: module);
# in tinytorch.nn.functional, the later module's version of a name nn.py has too wins once exported
# (module 04's companion gives nll_loss, cross_entropy and pad in full).
_LATER = {
    "nn": {"BatchNorm2d": "conv",
           "NLLLoss": "nn_more", "BCELoss": "nn_more", "Hardsigmoid": "nn_more", "Softsign": "nn_more",
           **dict.fromkeys(["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                            "MaxPool2d", "AvgPool2d", "MaxUnpool2d", "BatchNorm1d", "BatchNorm3d"], "conv_more")},
    "nn.functional": {"scaled_dot_product_attention": "attention", "batch_norm": "conv", "nll_loss": "nn_more",
                      "cross_entropy": "nn_more", "pad": "nn_more", "binary_cross_entropy": "nn_more",
                      "hardsigmoid": "nn_more", "softsign": "nn_more",
                      **dict.fromkeys(["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                       "conv_transpose3d", "max_pool2d", "avg_pool2d", "max_unpool2d",
                                       "interpolate"], "conv_more")},
}
# Names of hand-written modules at the top level, as PyTorch has them (name: module).
_HAND_WRITTEN = {"set_num_threads": "parallel", "get_num_threads": "parallel"}
_ALL_RE = _re.compile(r"^__all__\s*=\s*(\[.*?\])", _re.S | _re.M)
_METHODS_RE = _re.compile(r"^__tensor_methods__\s*=", _re.M)


def _exported(module):
    """Whether the package holds `module` (a file of this folder, or a subpackage)."""
    return (_HERE / f"{module}.py").is_file() or (_HERE / module / "__init__.py").is_file()


def _names_of(module):
    """`module.__all__`, read from its source without importing it ([] when it has none)."""
    match = _ALL_RE.search((_HERE / f"{module}.py").read_text(encoding="utf-8"))
    return _ast.literal_eval(match.group(1)) if match else []


def _notebook(module):
    """'04_layers' for 'nn': from nbdev's header of the exported file, or the course's modules/ folder."""
    number = _NOTEBOOK_OF[module]
    path = _HERE / f"{module}.py"
    if path.is_file():
        found = _re.search(r"modules/(\d\d_\w+)/", path.read_text(encoding="utf-8").split("\n", 1)[0])
        if found:
            return found.group(1)
    for doc, _ in _index().get(f"{__name__}.{module}", {}).values():
        return doc.split("/")[0]
    folders = sorted((_HERE.parent / "modules").glob(f"{number}_*"))
    return folders[0].name if folders else number


def _not_exported(module, what):
    """The AttributeError for `what` (a name) that module `module` defines but the package lacks."""
    number = _NOTEBOOK_OF[module]
    return AttributeError(f"{what} comes from notebook {_notebook(module)} (tinytorch.{module}), which is not "
                          f"exported yet: finish it and run `./learn export {number}`, then restart the kernel")


def _index():
    """nbdev's index of the course's symbols, `{module: {name: (doc, file)}}`, where shipped (the
    course and grading have it; a learner's package has it only after a plain nbdev_export)."""
    try:
        return _importlib.import_module(f"{__name__}._modidx").d["syms"]
    except (ImportError, AttributeError, KeyError, TypeError):
        return {}


def _later_owner(name):
    """The notebook module that will define `name`, by nbdev's index of the course, or None."""
    index = _index()
    for module in _NOTEBOOK_OF:
        if f"{__name__}.{module}.{name}" in index.get(f"{__name__}.{module}", {}):
            return module
    return None


def _owner(name):
    """The latest exported notebook module whose `__all__` holds `name`, or None."""
    for module in reversed(_NOTEBOOK_OF):
        if (_HERE / f"{module}.py").is_file() and name in _names_of(module):
            return module
    return None


def _tensor_method(name):
    """Module 03's hook for the methods that later notebooks give its Tensor (`Tensor.__getattr__` asks here):
    the function that the latest exported notebook module lists as method `name` in its dict
    `__tensor_methods__` (method name -> function of the tensor and the method's arguments), or None."""
    for module in reversed(_NOTEBOOK_OF):
        path = _HERE / f"{module}.py"
        if path.is_file() and _METHODS_RE.search(path.read_text(encoding="utf-8")):
            methods = _importlib.import_module(f"{__name__}.{module}").__tensor_methods__
            if name in methods:
                return methods[name]
    return None


class _NotExportedFinder:
    """Last on `sys.meta_path`: `import tinytorch.nn` where notebook 04 is not exported yet raises
    ModuleNotFoundError naming the notebook and the command (Python's own message, then the hint)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        package, _, module = fullname.partition(".")
        if package == __name__ and module in _NOTEBOOK_OF and not _exported(module):
            error = _not_exported(module, f"tinytorch.{module}")
            raise ModuleNotFoundError(f"No module named {fullname!r}: {error}", name=fullname)
        return None


if not any(type(finder).__name__ == "_NotExportedFinder" for finder in _sys.meta_path):
    # right after the finder of sys.path: before an editable install's finder, which would
    # import the module from another copy of the package
    _at = next((i + 1 for i, f in enumerate(_sys.meta_path) if getattr(f, "__name__", "") == "PathFinder"),
               len(_sys.meta_path))
    _sys.meta_path.insert(_at, _NotExportedFinder())


def _later_attribute(namespace):
    """A module `__getattr__` (PEP 562) for `tinytorch.<namespace>`: a name of `_LATER[namespace]` comes
    from its later module once exported, else raises AttributeError naming the notebook to finish."""
    table = _LATER[namespace]

    def __getattr__(name):
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module 'tinytorch.{namespace}' has no attribute {name!r}")
        if not _exported(module):
            raise _not_exported(module, f"tinytorch.{namespace}.{name}")
        return getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    return __getattr__


def _later_exported(namespace):
    """The names of `_LATER[namespace]` whose module is exported: `tinytorch.<namespace>` leaves them to
    its `__getattr__`, so that a later module's fuller version of a name wins."""
    return {name for name, module in _LATER.get(namespace, {}).items() if _exported(module)}


def _later_dir(namespace, names):
    """A module `__dir__` for `tinytorch.<namespace>`: its own names and the later ones exported."""
    def __dir__():
        return sorted(set(names) | {n for n, m in _LATER[namespace].items() if _exported(m)})
    return __dir__


def _submodule(dotted):
    """`import tinytorch.<dotted>`; a module over a notebook module not exported yet (tinytorch.optim
    over module 05's tinytorch.training) raises AttributeError naming that notebook."""
    try:
        return _importlib.import_module(f"{__name__}.{dotted}")
    except ModuleNotFoundError as error:
        missing = (error.name or "").rpartition(".")[2]
        if error.name == f"{__name__}.{missing}" and missing in _NOTEBOOK_OF:
            raise _not_exported(missing, f"tinytorch.{dotted}") from None
        raise


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _exported(name) and name != "_modidx":  # a submodule: tt.nn, tt.optim, tt.utils, ...
        return _submodule(name)
    if name in _NOTEBOOK_OF:
        raise _not_exported(name, f"tinytorch.{name}")
    module = _HAND_WRITTEN.get(name) or _owner(name)
    if module is not None:
        value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value  # later lookups skip this function, as for an imported submodule
        return value
    later = _later_owner(name)
    if later is not None and not _exported(later):
        raise _not_exported(later, f"tinytorch.{name}")
    waiting = [m for m in _NOTEBOOK_OF if not _exported(m)]
    hint = (f" in the notebooks exported so far (not exported yet: {', '.join(dict.fromkeys(_NOTEBOOK_OF[m] for m in waiting))})"
            if waiting else "")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}{hint}")


def __dir__():
    names = {n for n in globals() if not n.startswith("_")} | {"__version__"}
    names |= {p.stem for p in _HERE.glob("*.py") if not p.stem.startswith("_")}
    names |= {p.parent.name for p in _HERE.glob("*/__init__.py")}
    names |= set(_HAND_WRITTEN)
    for module in _NOTEBOOK_OF:
        if (_HERE / f"{module}.py").is_file():
            names.update(_names_of(module))
    return sorted(names)
