"""What learning the catalogued mistakes costs (`tinytorch_course.grading.learning`, issue #39).

    .venv/bin/python bench/bench_learning.py [MODULE ...] [--seed S]

Learns every exercise of each module (default: all) for one hidden-input seed, in a fresh cache of
its own (the course's own cache is not touched), and prints the seconds per module, per exercise on
average, and in all: the most that one variant of a term costs, when every exercise failed for some
learner (grading learns an exercise only then); a term of V variants costs V times as much.
Also times matching (`diagnose.diagnose`) of a notebook with one mistake per exercise learned.
"""
import argparse
from pathlib import Path
import sys
import tempfile
import time

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tinytorch_course import notebooks  # noqa: E402
from tinytorch_course.build import mistakes  # noqa: E402
from tinytorch_course.grading import learning  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=notebooks.module_ids(REPO))
    parser.add_argument("--seed", default="bench-learning")
    args = parser.parse_args()
    total = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-learning-") as cache:
        for module_id in args.modules:
            exercises = sorted(learning.exercise_ids(notebooks.read(notebooks.notebook_path(REPO, "modules", module_id))))
            started = time.perf_counter()
            learning.learned(REPO, module_id, cache, args.seed, exercises)
            seconds = time.perf_counter() - started
            total += seconds
            count = len(mistakes.catalogue(REPO, module_id))
            print(f"{module_id}: {len(exercises)} exercises, {count} mistakes learned in {seconds:.1f} s "
                  f"({seconds / max(1, len(exercises)):.2f} s an exercise, {seconds / max(1, count):.2f} s a mistake)",
                  flush=True)
    print(f"all: {total:.1f} s for one variant ({len(args.modules)} modules); a term of V variants: V times that")


if __name__ == "__main__":
    main()
