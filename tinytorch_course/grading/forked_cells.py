"""Run the cells of many variants of one notebook that share their first cells, as the grading
kernel runs them but without a kernel per variant: a process runs the shared cells once, then each
variant's other cells in a fork of itself (`learning`: each mistake of an exercise is the
same notebook up to the exercise's cell).

Run as `python -I forked_cells.py`: it reads one JSON request a line on stdin and answers each with one
JSON line on stdout. A request is `{"cells": [[[source, hidden], ...], ...], "records": folder,
"fork": bool}`: each cell is a list of parts, run in turn until one raises (`hidden`: run without
storing the source in the input history, as the grader runs a cell's hidden tests). The answer is
`{"errors": [null or [name, message], ...]}`, one per cell; cell i's records are written to
`folder/i.jsonl`. With `fork` false the cells run in this process (the shared cells), with `fork` true
in a child, which leaves this one as it was. Cells run as IPython's kernel runs them (its compiler
names cells by their source, as the records' `loc` expects), in the environment the grader gives the
kernel. What cells print to stdout is dropped; stderr goes to `stderr.log` in the working folder.
"""
import json
import os
import signal
import sys
import time

RECORDS_FD = 100  # $TINYTORCH_RECORDS is "fd:100": each cell's file is put there before it runs


def run_cells(shell, cells, folder, cell_timeout):
    """Run each cell's parts until one raises; `[None or [error name, message]]`, one per cell."""
    errors = []
    for index, parts in enumerate(cells):
        fd = os.open(os.path.join(folder, f"{index}.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(fd, RECORDS_FD)
        os.close(fd)
        error = None
        for source, hidden in parts:
            signal.alarm(cell_timeout)
            result = shell.run_cell(source, store_history=not hidden)
            signal.alarm(0)
            error = result.error_before_exec or result.error_in_exec
            if error is not None:
                break
        errors.append(None if error is None else [type(error).__name__, str(error)])
    return errors


def interrupt(signum, frame):
    """SIGALRM: stop the cell as the grader's timeout does, with an interrupt."""
    raise KeyboardInterrupt("the cell ran past its time limit")


def main():
    answers = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, RECORDS_FD)
    os.dup2(os.open("stderr.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), 2)  # in the working folder
    os.environ["TINYTORCH_RECORDS"] = f"fd:{RECORDS_FD}"
    os.environ["MPLBACKEND"] = "agg"
    signal.signal(signal.SIGALRM, interrupt)
    from ipykernel.compiler import XCachingCompiler
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config, compiler_class=XCachingCompiler)
    cell_timeout = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    for line in sys.stdin:
        request = json.loads(line)
        if not request["fork"]:
            errors = run_cells(shell, request["cells"], request["records"], cell_timeout)
        else:
            answer_path = os.path.join(request["records"], "answer.json")
            child = os.fork()
            if child == 0:
                try:
                    errors = run_cells(shell, request["cells"], request["records"], cell_timeout)
                    with open(answer_path, "w") as answer:
                        json.dump(errors, answer)
                finally:
                    os._exit(0)
            deadline = time.monotonic() + cell_timeout * (len(request["cells"]) + 1)
            while not os.waitpid(child, os.WNOHANG)[0]:  # a cell stuck where the alarm cannot stop it
                if time.monotonic() > deadline:
                    os.kill(child, signal.SIGKILL)
                    os.waitpid(child, 0)
                    break
                time.sleep(0.005)
            try:
                with open(answer_path) as answer:
                    errors = json.load(answer)
            except (OSError, ValueError):
                errors = [["ChildProcessError", "the forked run ended without an answer"]] * len(request["cells"])
        answers.write(json.dumps({"errors": errors}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
