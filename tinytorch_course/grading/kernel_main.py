"""The grading kernel, inside the sandbox: `python -I /grader/kernel/kernel_main.py -f FILE`.

It copies the submission's other files (/grader/input) into its working folder (/grader/work, a
filesystem of a fixed size), puts the reference package of the earlier modules (/grader/reference)
and the kernel's own files first on sys.path, installs the prebuilt matplotlib font cache, starts IPython's kernel with
no history file, installs the patching guard (`kernel_guard`, advisory: grades come from the
grader's own checks) and caps what the process writes to stdout and stderr.
"""
import faulthandler
import os
import shutil
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(os.path.dirname(HERE), "reference")
INPUT = os.path.join(os.path.dirname(HERE), "input")


def _cap(stream, budget):
    """Drop what a stream is sent past `budget` characters (the grader caps outputs as well;
    this keeps a flood from filling the kernel's memory and the connection)."""
    write, left = stream.write, [budget]

    def capped(text):
        left[0] -= len(text)
        if left[0] >= 0:
            return write(text)
        if left[0] + len(text) > 0:
            write(text[:left[0] + len(text)])
        return len(text)

    stream.write = capped


def main(argv):
    sys.path[:0] = [REFERENCE, HERE]
    for folder in [os.environ["HOME"], os.environ["IPYTHONDIR"], os.environ["JUPYTER_RUNTIME_DIR"]]:
        os.makedirs(folder, exist_ok=True)
    shutil.copytree(os.path.join(HERE, "mpl"), os.environ["MPLCONFIGDIR"], dirs_exist_ok=True)
    for folder, _, files in os.walk(INPUT):  # (copytree would chmod the folder, which root owns)
        target = os.path.join(os.getcwd(), os.path.relpath(folder, INPUT))
        os.makedirs(target, exist_ok=True)
        for name in files:
            shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the file limit fails with EFBIG
    faulthandler.enable()  # a crash names itself in the kernel's log

    import kernel_guard  # imports numpy and the reference package
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    arguments = [a for a in argv[1:] if not a.startswith("--IPKernelApp.log_level")]
    app.initialize(arguments + ["--HistoryManager.enabled=False", "--IPKernelApp.log_level=CRITICAL"])
    kernel_guard.install(app.shell, os.path.join(REFERENCE, "tinytorch", ""))
    for stream in (sys.stdout, sys.stderr):
        _cap(stream, 2 * int(os.environ["TINYTORCH_OUTPUT_BYTES"]))
    app.start()


if __name__ == "__main__":
    main(sys.argv)
