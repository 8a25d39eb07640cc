"""`milestone digits`: milestones/05_digits.py run with the reference package."""
import os
import runpy
import sys


def digits(root, epochs=40):
    """Run the digits milestone in `root`; exit status 1 if it misses its 97% target."""
    os.environ["DIGITS_EPOCHS"] = str(epochs)
    os.chdir(root)
    try:
        runpy.run_path(str(root / "milestones" / "05_digits.py"), run_name="__main__")
    except AssertionError as error:
        print(error, file=sys.stderr)
        return 1
    return 0
