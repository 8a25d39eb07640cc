"""Does a set of files handed to learners show solution code or hidden tests? (release/, the kit)"""
from pathlib import Path

from .. import notebooks

MIN_SECRET_LENGTH = 13  # shorter lines (`return out`, `pass`) are too common to count as leaks
SQLITE_HEADER = b"SQLite format 3\x00"  # nbgrader's gradebook is an SQLite file


def split_regions(source, begin, end):
    """`(inside, outside)`: the stripped, non-empty lines between `begin`/`end` markers, and the rest."""
    inside, outside, within = [], [], False
    for line in source.splitlines():
        if line.strip() in (begin, end):
            within = line.strip() == begin
        elif line.strip():
            (inside if within else outside).append(line.strip())
    return inside, outside


def _regions(source_notebook):
    """`(secret, public)` lines of a source notebook: inside its solution and hidden-test regions,
    and outside them."""
    secret, public = [], set()
    for cell in source_notebook.cells:
        hidden, rest = split_regions(cell.source, *notebooks.HIDDEN_MARKERS)
        solution, rest = split_regions("\n".join(rest), *notebooks.SOLUTION_MARKERS)
        secret += hidden + solution
        public |= set(rest)
    return secret, public


def secret_lines(source_notebook, public=frozenset()):
    """The solution and hidden-test lines of a source notebook that appear nowhere outside them
    (in it, or in `public`: lines handed out elsewhere in the course)."""
    secret, own_public = _regions(source_notebook)
    return [line for line in secret
            if len(line) >= MIN_SECRET_LENGTH and line not in own_public and line not in public]


def _visible_text(path):
    """What a learner reads in a file: a notebook's cell sources and outputs, any other file's text."""
    if path.suffix == ".ipynb":
        notebook = notebooks.read(path)
        parts = [c.source for c in notebook.cells]
        parts += [str(o) for c in notebook.cells for o in c.get("outputs", [])]
        return "\n".join(parts)
    return path.read_text(errors="replace")


def leaks(source_notebooks, files):
    """Problems, as readable strings, if `files` show any secret of `source_notebooks`.

    Every file is searched: for the markers in its raw text, for an SQLite gradebook, and
    line by line for solution and hidden-test lines (other than those that any of the source
    notebooks also hands out).
    """
    files = [Path(f) for f in files]
    problems = []
    lines = set()
    for path in files:
        raw = path.read_bytes()
        if raw.startswith(SQLITE_HEADER):
            problems.append(f"{path}: an SQLite database (a gradebook?)")
        text = raw.decode(errors="replace")
        problems += [f"{path}: contains {m!r}" for m in notebooks.SOLUTION_MARKERS + notebooks.HIDDEN_MARKERS
                     if m in text]
        lines |= {line.strip() for line in _visible_text(path).splitlines()}
    public = set().union(*(_regions(source)[1] for source in source_notebooks))
    for source in source_notebooks:
        shown = [line for line in secret_lines(source, public) if line in lines]
        problems += [f"shows a solution or hidden-test line: {line!r}" for line in shown[:5]]
    return problems
