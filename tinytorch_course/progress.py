"""Progress of long work (a build, a grading run): what is done, of how much, and the time left.

On a terminal, a tqdm bar on stderr; elsewhere (a log, CI, a pipe), one plain line per finished
item. Failures are printed as they happen, in both modes.
"""
import sys
import time


def duration(seconds):
    """`42 s`, `3 min 5 s`, `1 h 2 min`: a readable length of time."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class Progress:
    """`total` items of work, reported on `stream` (stderr by default) as each one finishes.

    `done(label, failure=None)` counts one item; a `failure` (a short reason) is printed at once.
    `fail(label, reason)` prints a failure of something outside the count (found before the work).
    `clock` gives seconds (time.monotonic unless a test fixes it); `bar` forces or refuses tqdm
    (default: a bar exactly when the stream is a terminal).
    """

    def __init__(self, total, what, stream=None, bar=None, clock=time.monotonic):
        self.total, self.what, self.count, self.failures = total, what, 0, 0
        self.stream = stream or sys.stderr
        self.clock, self.started = clock, clock()
        if bar is None:
            bar = bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = None
        if bar and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=what, unit="", file=self.stream, dynamic_ncols=True,
                            bar_format="{desc}: {n}/{total} |{bar}| {elapsed} elapsed, {remaining} left{postfix}")

    def left(self):
        """Seconds left at the mean pace so far (None before the first item is done)."""
        if not self.count:
            return None
        return (self.clock() - self.started) / self.count * (self.total - self.count)

    def fail(self, label, reason):
        self.failures += 1
        self._write(f"FAILED {label}: {reason}")

    def done(self, label, failure=None):
        self.count += 1
        if failure:
            self.fail(label, failure)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.failures} failed" if self.failures else "", refresh=False)
            self.bar.update(1)
            return
        elapsed = duration(self.clock() - self.started)
        failed = f", {self.failures} failed" if self.failures else ""
        self._write(f"{self.what}: {self.count}/{self.total} done ({label}){failed}, "
                    f"{elapsed} elapsed, about {duration(self.left())} left")

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def _write(self, line):
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
