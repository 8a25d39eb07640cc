"""`python -m tinytorch_course COMMAND`: the course's commands (see README.md)."""
import argparse
from pathlib import Path
import sys
import warnings

from .nbgrader_api import CourseError

ROOT = Path(__file__).resolve().parent.parent


def add_grade_commands(commands):
    grade = commands.add_parser("grade", help="the instructor's grading: roster, collect, run, summary")
    steps = grade.add_subparsers(dest="step", required=True)
    roster = steps.add_parser("roster", help="import learners from a CSV (id, first_name, last_name, email)")
    roster.add_argument("csv")
    collect = steps.add_parser("collect", help="collect one module's submissions")
    collect.add_argument("module", help="NN or NN_name")
    source = collect.add_mutually_exclusive_group(required=True)
    source.add_argument("--zip", nargs="+", metavar="ARCHIVE",
                        help="LMS archives of <student-id>_NN_name.ipynb files")
    source.add_argument("--folder", metavar="DIR", help="DIR/<student-id>/ holds each learner's files")
    source.add_argument("--exchange", action="store_true", help="nbgrader's exchange (c.Exchange.root)")
    term = steps.add_parser("term", help="start a term: new hidden inputs for every learner")
    term.add_argument("name", help="the term's name (e.g. 2027-spring)")
    term.add_argument("--variants", type=int,
                      help="variants of each module's hidden inputs, one answer key each (default: 4)")
    run = steps.add_parser("run", help="autograde in parallel, write feedback and grades, print the summary")
    run.add_argument("modules", nargs="*", help="NN or NN_name (default: every module)")
    run.add_argument("--student", action="append", help="only this learner (repeatable)")
    run.add_argument("--jobs", type=int, help="parallel submissions (default: the CPU count)")
    run.add_argument("--cell-timeout", type=int, help="seconds per cell (default: nbgrader_config.py)")
    run.add_argument("--notebook-timeout", type=int, default=900, help="seconds per notebook")
    run.add_argument("--memory-mb", type=int, default=3072, help="address space per process")
    run.add_argument("--job-memory-mb", type=int, default=4096, help="memory of a whole job, its files included")
    run.add_argument("--disk-mb", type=int, default=512, help="size of a job's working folder")
    run.add_argument("--processes", type=int, default=256, help="processes and threads of a whole job")
    run.add_argument("--no-feedback", action="store_true", help="skip the feedback HTML")
    steps.add_parser("summary", help="per module: submitted, graded, mean, failures and reviews")
    report = steps.add_parser("report", help="the class report: reports/NN_name.html and .csv (tests' pass "
                                             "rates and discrimination, named mistakes, unknown failures, submissions)")
    report.add_argument("modules", nargs="*", help="NN or NN_name (default: every module with graded learners)")
    name = steps.add_parser("name-cluster", help="catalogue a cluster of the report's unknown failures as a mistake")
    name.add_argument("module", help="NN or NN_name")
    name.add_argument("cluster", help="the cluster's number in the report, or GRADE_ID:SIGNATURE")
    name.add_argument("--says", required=True, help="what a learner who made it is told (no answer, no hidden input)")
    name.add_argument("--what", help="the mistake in a few words, for the course's developers (default: --says)")
    export = steps.add_parser("export", help="write the grades CSV (with status and reasons), or an LMS's import CSV")
    export.add_argument("--lms", choices=["canvas", "moodle"],
                        help="Canvas's or Moodle's grade import CSV, one column per module (graded scores only)")
    export.add_argument("--out", "--to", dest="out", type=Path,
                        help="the file (default: artifacts/grades.csv, or artifacts/grades-LMS.csv)")
    formgrader = steps.add_parser("formgrader", help="JupyterLab on localhost for manual review")
    formgrader.add_argument("--port", type=int, default=8899)


def module_id(name):
    from .notebooks import module_ids

    found = [m for m in module_ids(ROOT) if m == name or m.split("_")[0] == name]
    if not found:
        raise CourseError(f"no module {name!r}; modules: {', '.join(module_ids(ROOT))}")
    return found[0]


def export_step(args):
    from .grading import grading, lms

    if not args.lms:
        print(f"grades: {grading.export_grades(ROOT, args.out or ROOT / 'artifacts' / 'grades.csv')}")
        return
    out = args.out or ROOT / "artifacts" / f"grades-{args.lms}.csv"
    empty = lms.export(ROOT, args.lms, out)
    print(f"{args.lms} grades: {out}")
    if empty:
        print("left empty (not graded): " + ", ".join(f"{n} {state}" for state, n in sorted(empty.items())))


def report_step(args):
    from .grading import class_report

    if args.step == "name-cluster":
        module = module_id(args.module)
        entry = class_report.name_cluster(ROOT, module, args.cluster, args.says, args.what)
        print(f"mistakes/{module}.py: added {entry.cell}:{entry.what}, recognised by the signature of its "
              f"records on {entry.signature[0]}; write its old and new (the solution's text, the wrong answer)")
        return
    modules = [module_id(m) for m in args.modules] or class_report.reported_modules(ROOT)
    for module in modules:
        print("report: " + ", ".join(map(str, class_report.write_report(ROOT, module))))
    if not modules:
        print("nothing graded yet")


def grade(args):
    from .grading import grading

    if args.step == "roster":
        print(f"imported {len(grading.import_roster(ROOT, args.csv))} learners")
    elif args.step == "collect":
        module = module_id(args.module)
        if args.zip:
            for problem in grading.zip_collect(ROOT, module, args.zip):
                print(f"not collected: {problem}")
        elif args.folder:
            students, problems = grading.collect_folder(ROOT, module, args.folder)
            for problem in problems:
                print(f"not collected: {problem}")
            print(f"collected {len(students)} learners")
        else:
            grading.collect_exchange(ROOT, module)
        print(f"submissions are in {ROOT / 'submitted'}/<student>/{module}/")
    elif args.step == "term":
        from .build import hidden_inputs

        settings = hidden_inputs.set_term(ROOT, args.name, args.variants or hidden_inputs.DEFAULT_VARIANTS)
        hidden_inputs.secret(ROOT)  # made now if new, kept beside the gradebook
        print(f"term {settings['term']!r}: {settings['variants']} variant(s) of each module's hidden inputs")
    elif args.step == "run":
        from .grading.autograder import Limits

        limits = Limits(cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                        memory_mb=args.memory_mb, job_memory_mb=args.job_memory_mb,
                        disk_mb=args.disk_mb, processes=args.processes)
        grading.autograde(ROOT, [module_id(m) for m in args.modules] or None, args.student,
                          jobs=args.jobs, limits=limits, feedback=not args.no_feedback)
        print(f"grades: {grading.export_grades(ROOT, ROOT / 'artifacts' / 'grades.csv')}")
        print(grading.summary(ROOT))
    elif args.step == "summary":
        print(grading.summary(ROOT))
    elif args.step in ("report", "name-cluster"):
        report_step(args)
    elif args.step == "export":
        export_step(args)
    elif args.step == "formgrader":
        grading.formgrader(ROOT, args.port)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="export tinytorch/ and regenerate release/ and solutions/")
    build.add_argument("modules", nargs="*", help="NN or NN_name: regenerate only these (default: all)")
    demo = commands.add_parser("demo", help="build, then grade a sample class and print the grades")
    demo.add_argument("--no-build", action="store_true", help="grade the current build as it is")
    workspace = commands.add_parser("workspace", help="make the learners' workspace (a folder and a zip)")
    workspace.add_argument("--out", type=Path, default=ROOT / "artifacts" / "workspace",
                           help="where to write it (default: artifacts/workspace)")
    add_grade_commands(commands)
    hub = commands.add_parser("hub", help="run a class on JupyterHub on this machine (as root; Ctrl-C stops it)")
    hub.add_argument("--roster", help="the class: a CSV with columns id, first_name, last_name, email "
                                      "(needed the first time; each id becomes a system account)")
    hub.add_argument("--instructor", default="instructor", help="the instructor's account (default: instructor)")
    hub.add_argument("--state", type=Path, default=Path("/srv/tinytorch-hub"),
                     help="the hub's own folder: environment, proxy, exchange (default: /srv/tinytorch-hub)")
    hub.add_argument("--homes", type=Path, default=Path("/home"), help="where new accounts get their home")
    hub.add_argument("--port", type=int, default=8000, help="the hub's port on 127.0.0.1 (it also uses the next two)")
    milestone = commands.add_parser("milestone", help="run a milestone of the course with the package")
    milestone.add_argument("name", choices=["digits", "gpt", "cnn"],
                           help="digits: module 05's MLP on handwritten digits; gpt: module 07's GPT on Python; "
                                "cnn: module 08's CNN on the digits")
    milestone.add_argument("--epochs", type=int, default=None, help="digits (default 40), cnn (default 25): training epochs")
    milestone.add_argument("--minutes", type=float, default=10.0, help="gpt: training budget per framework")
    milestone.add_argument("--threads", type=int, default=2, help="gpt: threads for each framework (TinyTorch: BLAS and its pool)")
    milestone.add_argument("--max-chars", type=int, default=None, help="gpt: limit the corpus")
    milestone.add_argument("--framework", choices=["both", "tinytorch", "torch"], default="both",
                           help="gpt: train with TinyTorch, PyTorch, or both (PyTorch is optional)")
    args = parser.parse_args(argv)
    # nbgrader's gradebook code triggers SQLAlchemy 2 warnings that say nothing to the user.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    try:
        if args.command == "build":
            from .demo import build_course
            build_course(ROOT, [module_id(m) for m in args.modules] or None)
        elif args.command == "milestone":
            if args.name == "gpt":
                from .kit.milestone import gpt
                frameworks = ("tinytorch", "torch") if args.framework == "both" else (args.framework,)
                return gpt(ROOT, minutes=args.minutes, frameworks=frameworks, threads=args.threads,
                           max_chars=args.max_chars)
            if args.name == "cnn":
                from .kit.milestone import cnn
                return cnn(ROOT, epochs=args.epochs or 25)
            from .kit.milestone import digits
            return digits(ROOT, epochs=args.epochs or 40)
        elif args.command == "demo":
            from .demo import demo
            demo(ROOT, rebuild=not args.no_build)
        elif args.command == "workspace":
            from .kit.workspace import make_workspace
            make_workspace(ROOT, args.out)
        elif args.command == "grade":
            return grade(args)
        elif args.command == "hub":
            from .hub.hub import prepare, serve
            prepare(ROOT, args.state, roster=args.roster, instructor=args.instructor, homes=args.homes,
                    port=args.port)
            serve(args.state)
    except CourseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
