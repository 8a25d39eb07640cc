"""The catalogue of plausible learner mistakes: `mistakes/NN_name.py` beside `modules/NN_name/`.

Each file lists `MISTAKES`, one `Mistake` per wrong answer: it replaces `old` by `new` (once) in the
solution cell `cell` of the module's source notebook. `what` names the mistake for the course's
developers (tests/test_mutants.py checks that each loses points on a hidden test, and on a visible
one unless `hidden_only` gives the reason the visible tests must not reveal it); `says` tells a
learner who made it what is wrong and where to look, without the answer or any hidden input.
An entry named from the class report (`./course grade name-cluster`) carries the `signature` of the
records of the failures it was named from (grading names a learner whose failing test cell has that
signature: `grading/diagnose.py`), and empty `old`/`new` until the instructor writes them; nothing
runs it until then (`runnable`).
The catalogue holds solution code: it is never released.
"""
import runpy
from pathlib import Path
from typing import NamedTuple, Optional, Tuple


class Mistake(NamedTuple):
    cell: str  # grade id of the solution cell
    what: str  # for developers: the wrong answer in a few words
    old: str  # the solution's text ...
    new: str  # ... and the wrong answer's, in its place
    says: str = ""  # for the learner who made it
    hidden_only: Optional[str] = None  # why no visible test may catch it
    signature: Optional[Tuple[str, str]] = None  # (test grade id, signature of its failed records)

    @property
    def runnable(self):
        """Whether its wrong answer can be made (`old` written): one named from a cluster cannot until then,
        and is named by its `signature` alone."""
        return bool(self.old)


def catalogue_path(root, module_id):
    return Path(root) / "mistakes" / f"{module_id}.py"


def catalogue(root, module_id):
    """The module's `[Mistake]` (empty where it has no catalogue)."""
    path = catalogue_path(root, module_id)
    return list(runpy.run_path(str(path))["MISTAKES"]) if path.is_file() else []
