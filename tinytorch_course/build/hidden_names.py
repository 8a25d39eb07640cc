"""Names that only hidden tests bind, read by what learners get: the release has no hidden tests, so
such a read is a NameError for every learner (and grading, which restores the hidden cells, never
shows it). `./course build` refuses a notebook that has one.

A name counts as bound where a statement binds it in the notebook's global scope (assignment,
import, for and with targets, def, class, walrus, except-as); names bound inside a function, a
lambda or a comprehension are local to it. A read counts where it resolves to a global: at top
level, or in a function whose own scopes do not bind it.
"""
import ast
import builtins
import textwrap

from .. import notebooks

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def split_hidden(source):
    """`(visible, [hidden region, ...])`: the cell as released, and the code of each hidden region
    (dedented); the marker lines themselves belong to neither."""
    begin, end = notebooks.HIDDEN_MARKERS
    visible, regions, region = [], [], None
    for line in source.splitlines():
        if line.strip() == begin:
            region = []
        elif line.strip() == end and region is not None:
            regions.append(textwrap.dedent("\n".join(region)))
            region = None
        else:
            (visible if region is None else region).append(line)
    return "\n".join(visible), regions


def parse(source):
    """The syntax tree of a cell's code, IPython magics turned into calls (their arguments are strings)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _targets(node):
    """Names a binding node binds in the scope it runs in."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*"}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    return set()


def _inner(scope):
    """The child nodes of `scope` that run inside it: not a def's decorators, defaults and
    annotations, a class's bases and decorators, a comprehension's first iterable (the enclosing
    scope runs those)."""
    if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(scope.body)
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    if isinstance(scope, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        first, *rest = scope.generators
        results = [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]
        return [first.target, *first.ifs, *rest, *results]
    return list(ast.iter_child_nodes(scope))


def _own_nodes(scope):
    """The nodes that run in `scope` itself: nested scopes' bodies excluded (their names, a def's
    decorators and defaults, a comprehension's first iterable do run in `scope`)."""
    pending = _inner(scope)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending += [*node.decorator_list, *node.args.defaults,
                        *[d for d in node.args.kw_defaults if d is not None]]
        elif isinstance(node, ast.Lambda):
            pending += [*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]
        elif isinstance(node, ast.ClassDef):
            pending += [*node.decorator_list, *node.bases, *node.keywords]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            pending.append(node.generators[0].iter)
            pending += [n.target for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]  # binds outside
        else:
            pending += ast.iter_child_nodes(node)


def _local_names(scope):
    """The names a function, lambda, class or comprehension binds for itself."""
    names = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        names |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                  *filter(None, [args.vararg, args.kwarg])]}
    if isinstance(scope, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        names |= {n.id for g in scope.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    declared_global = {name for sub in ast.walk(scope) if isinstance(sub, ast.Global) for name in sub.names}
    for node in _own_nodes(scope):
        names |= _targets(node)
    return names - declared_global


def global_bindings(tree):
    """The names that `tree`, run as a cell, binds in the notebook's namespace."""
    names = set()
    for node in _own_nodes(tree):
        names |= _targets(node)
        if isinstance(node, SCOPES):
            names |= {name for sub in ast.walk(node) if isinstance(sub, ast.Global) for name in sub.names}
    return names


def global_reads(tree):
    """`{name: first line}` of the reads in `tree` that resolve to the notebook's namespace."""
    reads = {}

    def visit(scope, outer):
        own = outer if isinstance(scope, ast.Module) else outer | _local_names(scope)
        for node in _own_nodes(scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in own:
                reads[node.id] = min(reads.get(node.id, node.lineno), node.lineno)  # the first
            if isinstance(node, SCOPES):
                visit(node, outer if isinstance(scope, ast.ClassDef) else own)  # methods skip the class's names

    visit(tree, frozenset())
    return reads


def _label(index, cell):
    gid = notebooks.grade_id(cell)
    return f"cell {index} ({gid})" if gid else f"cell {index} (no grade id)"


def hidden_only_reads(notebook):
    """`[(reading cell, line, name, binding cell)]`: reads, outside every hidden-test region, of a name
    that only hidden-test regions bind (builtins aside: a read of one still works in the release)."""
    cells = [(_label(i, c), *split_hidden(c.source)) for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
    visible_bound, hidden_bound = set(), {}
    for label, visible, regions in cells:
        visible_bound |= global_bindings(parse(visible))
        for region in regions:
            for name in global_bindings(parse(region)):
                hidden_bound.setdefault(name, label)
    hidden_only = set(hidden_bound) - visible_bound - set(dir(builtins))
    return [(label, line, name, hidden_bound[name]) for label, visible, _ in cells
            for name, line in sorted(global_reads(parse(visible)).items(), key=lambda item: item[1])
            if name in hidden_only]


def check_notebook(path):
    """Raise `CourseError` naming each read of a name that only the hidden tests bind."""
    from ..nbgrader_api import CourseError

    problems = hidden_only_reads(notebooks.read(path))
    if problems:
        raise CourseError(f"{path}: names that only hidden tests bind are read where learners run the "
                          "notebook without them (NameError in the release); bind them in a visible cell:\n"
                          + "\n".join(f"  {cell}, line {line}: reads {name!r}, bound only in the hidden tests "
                                      f"of {where}" for cell, line, name, where in problems))
