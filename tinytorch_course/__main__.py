"""`python -m tinytorch_course COMMAND`: the course's commands (see README.md)."""
import argparse
from pathlib import Path
import sys
import warnings

from .nbgrader_api import CourseError

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None):
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="export tinytorch/ and regenerate release/ and solutions/")
    demo = commands.add_parser("demo", help="build, then grade a sample class and print the grades")
    demo.add_argument("--no-build", action="store_true", help="grade the current build as it is")
    milestone = commands.add_parser("milestone", help="run a milestone of the course with the package")
    milestone.add_argument("name", choices=["digits", "gpt"],
                           help="digits: module 05's MLP on handwritten digits; gpt: module 07's GPT on Python")
    milestone.add_argument("--epochs", type=int, default=40, help="digits: training epochs")
    milestone.add_argument("--minutes", type=float, default=10.0, help="gpt: training budget per framework")
    milestone.add_argument("--threads", type=int, default=2, help="gpt: BLAS / PyTorch threads")
    milestone.add_argument("--max-chars", type=int, default=None, help="gpt: limit the corpus")
    milestone.add_argument("--framework", choices=["both", "tinytorch", "torch"], default="both",
                           help="gpt: train with TinyTorch, PyTorch, or both (PyTorch is optional)")
    args = parser.parse_args(argv)
    # nbgrader's gradebook code triggers SQLAlchemy 2 warnings that say nothing to the user.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    try:
        if args.command == "build":
            from .build import build
            build(ROOT)
        elif args.command == "milestone":
            if args.name == "gpt":
                from .milestone import gpt
                frameworks = ("tinytorch", "torch") if args.framework == "both" else (args.framework,)
                return gpt(ROOT, minutes=args.minutes, frameworks=frameworks, threads=args.threads,
                           max_chars=args.max_chars)
            from .milestone import digits
            return digits(ROOT, epochs=args.epochs)
        elif args.command == "demo":
            from .demo import demo
            demo(ROOT, rebuild=not args.no_build)
    except CourseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
