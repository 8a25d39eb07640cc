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
    milestone.add_argument("name", choices=["digits"], help="digits: module 05's MLP on handwritten digits")
    milestone.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args(argv)
    # nbgrader's gradebook code triggers SQLAlchemy 2 warnings that say nothing to the user.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    try:
        if args.command == "build":
            from .build import build
            build(ROOT)
        elif args.command == "milestone":
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
