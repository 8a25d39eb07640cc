"""Answer keys per hidden-input variant: what they cost, and whether one release run per module
serves every variant.

`python bench/bench_variants.py [--variants 4] [MODULE ...]` makes, in a fresh copy of the course
and a fresh cache, the answer key of each variant of each module and the release run of each variant,
timing them; then checks that every variant's records sit where variant 0's do (`verdicts.layout`)
and that the informative marks moved from variant 0's release run (what grading does) equal those
made from the variant's own release run.
"""
import argparse
import copy
from pathlib import Path
import sys
import tempfile
import time

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tinytorch_course import demo, notebooks  # noqa: E402
from tinytorch_course.build import hidden_inputs  # noqa: E402
from tinytorch_course.grading import verdicts  # noqa: E402
from tinytorch_course.nbgrader_api import GRADER_KERNEL, install_grader_kernel  # noqa: E402


def marks(key):
    return {gid: [entry["informative"] for entry in records] for gid, records in key.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--variants", type=int, default=hidden_inputs.DEFAULT_VARIANTS)
    args = parser.parse_args()
    install_grader_kernel()
    with tempfile.TemporaryDirectory() as scratch:
        root = demo.copy_course(REPO, Path(scratch) / "course")
        hidden_inputs.set_term(root, "bench", args.variants)
        cache = Path(scratch) / "cache"
        print(f"| module | answer key, each of {args.variants} variants (s) | release run (s) | "
              "records where variant 0's | marks moved = own |")
        print("|---|---|---|---|---|")
        for module_id in args.modules or notebooks.module_ids(root):
            seeds = [hidden_inputs.seed(root, module_id, v) for v in range(args.variants)]
            keys, key_times, release, release_times = [], [], [], []
            for seed in seeds:
                started = time.perf_counter()
                keys.append(verdicts._cached_run(root, module_id, cache, GRADER_KERNEL, seed, release=False))
                key_times.append(time.perf_counter() - started)
                started = time.perf_counter()
                release.append(verdicts._cached_run(root, module_id, cache, GRADER_KERNEL, seed, release=True))
                release_times.append(time.perf_counter() - started)
            same_layout = all(verdicts.layout(key) == verdicts.layout(keys[0]) for key in keys)
            same_marks = all(marks(verdicts.mark_informative(copy.deepcopy(key), release[0], keys[0]))
                             == marks(verdicts.mark_informative(copy.deepcopy(key), own))
                             for key, own in zip(keys, release))
            print(f"| {module_id} | {', '.join(f'{t:.1f}' for t in key_times)} | "
                  f"{sum(release_times) / len(release_times):.1f} | {same_layout} | {same_marks} |", flush=True)


if __name__ == "__main__":
    main()
