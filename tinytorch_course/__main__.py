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
    workspace = commands.add_parser("workspace", help="make the learners' workspace (a folder and a zip)")
    workspace.add_argument("--out", type=Path, default=ROOT / "artifacts" / "workspace",
                           help="where to write it (default: artifacts/workspace)")
    args = parser.parse_args(argv)
    # nbgrader's gradebook code triggers SQLAlchemy 2 warnings that say nothing to the user.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    try:
        if args.command == "build":
            from .build import build
            build(ROOT)
        elif args.command == "demo":
            from .demo import demo
            demo(ROOT, rebuild=not args.no_build)
        elif args.command == "workspace":
            from .workspace import make_workspace
            make_workspace(ROOT, args.out)
    except CourseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
