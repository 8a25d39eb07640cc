"""Per-learner hidden inputs: which variant of a module each learner is graded on, and its seed.

A hidden test draws its random inputs from `tinytorch.testing.hidden_rng(name)`, whose seed the
grader passes to the grading kernel only (`$TINYTORCH_HIDDEN_SEED`). The grader maps each learner
to one of the term's `variants` of a module by a keyed hash (HMAC-SHA256) of the course's secret,
the term, the learner and the module; the variant's seed is an HMAC of (term, module, variant).
Learners of different variants, and every learner in two terms, get different hidden inputs; the
answer key is made once per variant (`verdicts.reference_records`).

Instructor state beside the gradebook, never committed: `grading-secret` (made once, mode 0600)
and `grading-term.json` (`./course grade term NAME [--variants V]`).

`python -m tinytorch_course.build.hidden_inputs` rewrites the hidden tests of `modules/` that draw from a
fixed seed, `np.random.default_rng(K)`, into `hidden_rng("GRADE_ID-K")` (`rewrite_source`).
"""
import hashlib
import hmac
import json
import os
from pathlib import Path
import re
import secrets
import sys
import tempfile

from .. import notebooks

SECRET_FILE = "grading-secret"
TERM_FILE = "grading-term.json"
DEFAULT_VARIANTS = 4


def secret(root):
    """The course's grading secret (bytes), made on first use, readable by its owner only."""
    path = Path(root) / SECRET_FILE
    if not path.exists():
        fd, temporary = tempfile.mkstemp(dir=root, prefix=".grading-secret-")  # mode 0600
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        try:
            os.link(temporary, path)  # whole, or not at all if another process made it first
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as f:
        text = f.read().strip()
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise ValueError(f"{path} is not a grading secret (64 hex digits); delete it to make a new one "
                         "(every learner's hidden inputs change)")
    return bytes.fromhex(text)


def term(root):
    """`{"term": name, "variants": V}` set by `set_term` (an unnamed term with the default V if none)."""
    path = Path(root) / TERM_FILE
    settings = json.loads(path.read_text()) if path.is_file() else {}
    return {"term": str(settings.get("term", "")), "variants": int(settings.get("variants", DEFAULT_VARIANTS))}


def set_term(root, name, variants=DEFAULT_VARIANTS):
    """Start term `name` with `variants` variants of each module: every learner's hidden inputs change."""
    if not 1 <= int(variants) <= 1000:
        raise ValueError(f"variants must be between 1 and 1000, got {variants}")
    (Path(root) / TERM_FILE).write_text(json.dumps({"term": str(name), "variants": int(variants)}) + "\n")
    return term(root)


def _mac(root, *parts):
    return hmac.new(secret(root), json.dumps(parts).encode(), hashlib.sha256).digest()


def variant(root, module_id, student_id):
    """`{"term", "variants", "variant"}`: the variant of `module_id` that `student_id` is graded on."""
    settings = term(root)
    mac = _mac(root, "variant", settings["term"], settings["variants"], student_id, module_id)
    return dict(settings, variant=int.from_bytes(mac[:8], "big") % settings["variants"])


def seed(root, module_id, number):
    """The hidden-input seed (hex) of variant `number` of `module_id` in the current term."""
    settings = term(root)
    return _mac(root, "seed", settings["term"], settings["variants"], module_id, number).hex()[:32]


# ------------------------------------------------------------------ the notebooks' rewrite

FIXED_RNG = re.compile(r"np\.random\.default_rng\((?:seed=)?([^()]+)\)")
IMPORT = re.compile(r"^(from tinytorch\.testing import [^\n(]+)$", re.M)


def rewrite_source(source, grade_id):
    """A test cell's source with each `np.random.default_rng(K)` of its hidden regions drawing from
    `hidden_rng("GRADE_ID-K")` (the same K, the same generator, as before); one that mirrors a
    framework `Generator(K)` of the same region (reproducing that generator's stream) stays."""
    begin, end = notebooks.HIDDEN_MARKERS
    lines, hidden, region = source.splitlines(keepends=True), False, []
    out = []

    def flush():
        text = "".join(region)
        mirrored = set(re.findall(r"\bGenerator\(([^()]+)\)", text))

        def replace(match):
            argument = match.group(1).strip()
            if argument in mirrored:
                return match.group(0)
            name = (f'"{grade_id}-{argument}"' if re.fullmatch(r"\d+", argument)
                    else f'f"{grade_id}-{{{argument}}}"')
            return f"hidden_rng({name})"

        out.append(FIXED_RNG.sub(replace, text))
        region.clear()

    for line in lines:
        if line.strip() in (begin, end):
            if hidden:
                flush()
            hidden = line.strip() == begin
            out.append(line)
        elif hidden:
            region.append(line)
        else:
            out.append(line)
    flush()
    return "".join(out)


def rewrite_notebook(notebook):
    """Rewrite every test cell's hidden regions (`rewrite_source`) and import `hidden_rng` where the
    notebook imports the checks; returns the number of cells changed."""
    changed = 0
    for cell in notebook.cells:
        if cell.cell_type == "code" and notebooks.is_test(cell):
            source = rewrite_source(cell.source, notebooks.grade_id(cell))
            changed += source != cell.source
            cell.source = source
    if changed:
        for cell in notebook.cells:
            match = IMPORT.search(cell.source) if cell.cell_type == "code" else None
            if match and "hidden_rng" not in match.group(1):
                cell.source = cell.source[:match.end(1)] + ", hidden_rng" + cell.source[match.end(1):]
                break
        else:
            raise ValueError("no `from tinytorch.testing import ...` line to add hidden_rng to")
    return changed


def main(root="."):
    for module_id in notebooks.module_ids(root):
        path = notebooks.notebook_path(root, "modules", module_id)
        notebook = notebooks.read(path)
        changed = rewrite_notebook(notebook)
        if changed:
            notebooks.write(notebook, path)
        print(f"{module_id}: {changed} hidden test cell(s) rewritten")


if __name__ == "__main__":
    main(*sys.argv[1:])
