"""`import tinytorch as tt`: PyTorch's top level, lazily, in the whole package and in a learner's package
that holds only the modules exported so far (tinytorch/__init__.py); the same rule for names of later
notebooks in tinytorch.nn and tinytorch.nn.functional."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from tinytorch_course.grading.sandbox import package_owners
from tinytorch_course.kit.workspace import hand_written

NOTEBOOK_MODULES = ["tensor_base", "strides", "autograd", "autograd_more", "nn", "nn_more", "training", "attention",
                    "transformer"]


def package_until(tmp_path, module_id, modidx=True):
    """A copy of the package as a learner has it once every notebook before `module_id` is exported
    (hand-written modules included; `_modidx.py`, nbdev's index of the course, only if `modidx`)."""
    later = {name for name, owner in package_owners(REPO).items() if owner >= module_id}
    for path in (REPO / "tinytorch").rglob("*.py"):
        dotted = path.relative_to(REPO / "tinytorch").with_suffix("").as_posix().replace("/", ".")
        if dotted in later or "__pycache__" in path.parts or (path.name == "_modidx.py" and not modidx):
            continue
        target = tmp_path / "tinytorch" / path.relative_to(REPO / "tinytorch")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return tmp_path


def run(root, code):
    """Run `code` in a fresh Python on the package under `root`; its printed JSON."""
    done = subprocess.run([sys.executable, "-c", "import json\n" + code], cwd=root, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(root)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def error_of(root, expression):
    """(class name, message) of the error that `expression` raises, or None."""
    return run(root, f"""
import tinytorch as tt
try:
    {expression}
    print(json.dumps(None))
except Exception as e:
    print(json.dumps([type(e).__name__, str(e)]))
""")


def test_import_is_lazy_and_gives_torch_top_level():
    out = run(REPO, """
import sys
import tinytorch as tt
eager = sorted(m for m in sys.modules if m.startswith('tinytorch.'))
import tinytorch.autograd as ag, tinytorch.tensor_base as tb, tinytorch.nn as nn, tinytorch.training as tr
import tinytorch.autograd_more as more
x = tt.tensor([1.0, 2.0], requires_grad=True)
(x * x).sum().backward()
with tt.no_grad():
    y = x * 2
print(json.dumps({
    "eager": eager, "tensor": tt.tensor is more.tensor and type(tt.tensor(1.0)) is ag.Tensor, "Tensor": tt.Tensor is ag.Tensor,
    "grad": x.grad.tolist(), "no_grad": y.requires_grad, "float32": tt.float32 is tb.float32,
    "int64": tt.int64 is tb.int64, "manual_seed": tt.manual_seed is tb.manual_seed,
    "zeros": tt.zeros(2, 3).shape == (2, 3) and type(tt.zeros(2)) is ag.Tensor,
    "nn": tt.nn is nn, "F": tt.nn.functional is nn.functional, "relu": tt.nn.functional.relu is nn.relu,
    "optim": tt.optim.AdamW is tr.AdamW, "data": tt.utils.data.DataLoader is tr.DataLoader,
    "sdpa": tt.nn.functional.scaled_dot_product_attention is __import__('tinytorch.attention').attention.scaled_dot_product_attention,
}))
""")
    assert out.pop("eager") == []
    assert out.pop("grad") == [2.0, 4.0]
    assert out.pop("no_grad") is False
    assert all(out.values()), out


def test_every_public_name_resolves_to_the_latest_module_that_defines_it():
    out = run(REPO, f"""
import ast, importlib, re
import tinytorch as tt
names = set(dir(tt))
checked, wrong, missing = 0, [], []
owner = {{}}
for module in {NOTEBOOK_MODULES!r}:
    for name in importlib.import_module('tinytorch.' + module).__all__:
        owner[name] = module
for name, module in owner.items():
    checked += 1
    if name not in names:
        missing.append(name)
    if getattr(tt, name) is not getattr(importlib.import_module('tinytorch.' + module), name):
        wrong.append((name, module))
print(json.dumps([checked, wrong, missing, sorted(set(['nn', 'optim', 'utils', 'data', 'testing']) - names)]))
""")
    checked, wrong, missing, modules = out
    assert checked > 200 and wrong == [] and missing == [] and modules == []


def test_unknown_names_raise_attribute_error():
    kind, message = error_of(REPO, "tt.no_such_op")
    assert kind == "AttributeError" and "no_such_op" in message
    assert run(REPO, "import tinytorch as tt; print(json.dumps([hasattr(tt, 'no_such_op'), hasattr(tt, '__wrapped__')]))") \
        == [False, False]


@pytest.mark.parametrize("modidx", [True, False])
def test_learner_package_after_module_02(tmp_path, modidx):
    root = package_until(tmp_path, "03_autograd", modidx)
    out = run(root, """
import sys
import tinytorch as tt, tinytorch.strides as s
t = tt.tensor([[1, 2], [3, 4]])
print(json.dumps([tt.tensor is s.tensor, tt.Tensor is s.Tensor, t.T.tolist(), 'autograd' in sys.modules]))
""")
    assert out == [True, True, [[1, 3], [2, 4]], False]
    cases = [("tt.nn", "04_layers"), ("tt.optim", "05_training"), ("tt.utils.data", "05_training"),
             ("import tinytorch.nn", "04_layers"), ("tt.Linear", "04_layers")]
    for expression, notebook in cases[:None if modidx else -1]:  # names of functions: by nbdev's index
        kind, message = error_of(root, expression)
        number = notebook[:2]
        assert f"./learn export {number}" in message and (notebook in message or not modidx), (expression, message)
        assert kind == ("ModuleNotFoundError" if expression.startswith("import") else "AttributeError")
    kind, message = error_of(root, "tt.no_such_op")
    assert kind == "AttributeError" and "no_such_op" in message and "03" in message


def test_learner_package_after_module_05(tmp_path):
    root = package_until(tmp_path, "06_attention")
    out = run(root, """
import tinytorch as tt
import tinytorch.training as tr
print(json.dumps([tt.optim.SGD is tr.SGD, tt.utils.data.TensorDataset is tr.TensorDataset,
                  'scaled_dot_product_attention' in dir(tt)]))
""")
    assert out == [True, True, False]
    for expression in ["tt.nn.functional.scaled_dot_product_attention", "tt.scaled_dot_product_attention",
                       "import tinytorch.nn.functional as F; F.scaled_dot_product_attention"]:
        kind, message = error_of(root, expression)
        assert kind == "AttributeError" and "06_attention" in message and "./learn export 06" in message, message


@pytest.mark.parametrize("name", ["nn.Conv2d", "nn.MaxPool2d", "nn.AvgPool2d", "nn.BatchNorm2d", "nn.Conv1d",
                                  "nn.ConvTranspose2d", "nn.BatchNorm1d", "nn.functional.conv2d",
                                  "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.batch_norm",
                                  "nn.functional.interpolate"])
def test_convolution_names_come_from_module_08(name):
    """From its main notebook (tinytorch.conv) or its companion (tinytorch.conv_more: PyTorch's full arguments)."""
    if (REPO / "tinytorch" / "conv.py").is_file():
        assert run(REPO, f"import tinytorch as tt, tinytorch.conv as c, tinytorch.conv_more as m; "
                         f"print(json.dumps(any(tt.{name} is getattr(module, '{name.rpartition('.')[2]}', None) "
                         f"for module in (m, c))))")
    else:
        kind, message = error_of(REPO, f"tt.{name}")
        assert kind == "AttributeError" and "tinytorch.conv" in message and "./learn export 08" in message


def test_unknown_names_of_nn_raise_attribute_error():
    for expression in ["tt.nn.NoSuchLayer", "tt.nn.functional.no_such_function"]:
        kind, message = error_of(REPO, expression)
        assert kind == "AttributeError" and expression.rpartition(".")[2] in message


def test_the_kit_ships_the_hand_written_package():
    shipped = set(hand_written(REPO))
    assert {"tinytorch/__init__.py", "tinytorch/optim.py", "tinytorch/data.py", "tinytorch/utils/__init__.py",
            "tinytorch/utils/data.py"} <= shipped
    assert not any((REPO / path).read_text().startswith("# AUTOGENERATED") for path in shipped)


# ------------------------------------------------- numpy() of a tensor that requires grad (issue 16)

NUMPY_OF_GRAD = "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."


def _numpy_error(fn):
    """The (class name, message) that `fn()` raises, or None if it returns."""
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - any class is reported and compared
        return type(error).__name__, str(error)
    return None


@pytest.mark.parametrize("make", ["leaf", "result"])
def test_numpy_refuses_a_tensor_that_requires_grad_like_pytorch(make):
    import tinytorch as tt
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    t = x if make == "leaf" else x * 2
    got = _numpy_error(t.numpy)
    assert got == ("RuntimeError", NUMPY_OF_GRAD), f"{make}.numpy() with requires_grad: expected " \
        f"RuntimeError({NUMPY_OF_GRAD!r}), got {got}"
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    want = _numpy_error((tx if make == "leaf" else tx * 2).numpy)
    assert got == want, f"expected PyTorch's {want}, got {got}"


def test_numpy_works_under_no_grad_after_detach_and_without_requires_grad():
    import numpy as np
    import tinytorch as tt
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    with tt.no_grad():
        under = x.numpy()
        under[0] = 5.0  # still a view of the tensor's memory
    assert x.tolist() == [5.0, 2.0], f"numpy() under no_grad shares memory: expected [5.0, 2.0], got {x.tolist()}"
    np.testing.assert_array_equal(x.detach().numpy(), [5.0, 2.0])
    np.testing.assert_array_equal((x * 2).detach().numpy(), [10.0, 4.0])
    with tt.set_grad_enabled(False):
        np.testing.assert_array_equal((x + 1).numpy(), [6.0, 3.0])
    with tt.no_grad(), tt.enable_grad():
        assert _numpy_error(x.numpy) == ("RuntimeError", NUMPY_OF_GRAD), "enable_grad inside no_grad refuses again"
    plain = tt.tensor([1.0, 2.0])
    np.testing.assert_array_equal(plain.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal((plain * x.detach()).numpy(), [5.0, 4.0])
    np.testing.assert_array_equal(tt.tensor([1, 2]).numpy(), [1, 2])  # integers never require grad
    x.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])  # a gradient does not require grad
    # what reads values without handing out an array keeps working, as in PyTorch
    assert x.tolist() == [5.0, 2.0] and x[0].item() == 5.0 and "requires_grad=True" in repr(x)
    assert (x > 3).tolist() == [True, False] and x.argmax().item() == 0


def test_the_library_reads_tensors_that_require_grad_itself():
    """backward, autograd.grad, a layer's forward + loss, an optimizer step and the testing checks all
    work on tensors that require grad (they run under no_grad or read through the private accessor)."""
    import numpy as np
    import tinytorch as tt
    import tinytorch.nn as nn
    import tinytorch.nn.functional as F
    from tinytorch.autograd import grad, gradcheck
    from tinytorch.testing import assert_close

    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 3))
    x, y = tt.randn(5, 4), tt.tensor([0, 1, 2, 1, 0])
    opt = tt.optim.AdamW(model.parameters(), lr=1e-2)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    assert all(not np.array_equal(b, p.detach().numpy()) for b, p in zip(before, model.parameters())), \
        "AdamW.step() changed every parameter"
    assert tt.is_grad_enabled(), "grad mode is on again after backward() and step()"
    sgd = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    F.mse_loss(model(x), tt.zeros(5, 3)).backward()
    sgd.step()
    assert_close(model[0].weight, model[0].weight.detach().numpy(), "assert_close of a parameter")
    w = tt.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=tt.float64, requires_grad=True)
    (gw,) = grad((w * w).sum(), w)
    np.testing.assert_array_equal(gw.numpy(), [[2.0, 4.0], [6.0, 8.0]])
    assert gradcheck(lambda a: (a * a).tanh().sum(), (w,))
    state = model.state_dict()
    assert all(not v.requires_grad for v in state.values()), "state_dict() holds detached tensors, as in PyTorch"
    model.load_state_dict({k: tt.ones(v.shape) for k, v in state.items()})
    np.testing.assert_array_equal(model[0].bias.detach().numpy(), np.ones(8))
