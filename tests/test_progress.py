"""Progress of long work: plain lines in a log (done, of how many, time left; failures at once),
a tqdm bar on a terminal."""
import io

from tinytorch_course.progress import Progress, duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_plain_lines_say_what_is_done_of_how_much_and_the_time_left():
    out, clock = io.StringIO(), Clock()
    progress = Progress(4, "grading", stream=out, clock=clock)
    assert progress.bar is None  # a StringIO is not a terminal
    clock.now += 10
    progress.done("01_tensor ada")
    clock.now += 30
    progress.done("01_tensor bob", failure="the kernel died in cell 3")
    progress.fail("02_strides eve", "wrong file name")
    clock.now += 200
    progress.done("02_strides ada")
    progress.close()
    assert out.getvalue().splitlines() == [
        "grading: 1/4 done (01_tensor ada), 10 s elapsed, about 30 s left",
        "FAILED 01_tensor bob: the kernel died in cell 3",
        "grading: 2/4 done (01_tensor bob), 1 failed, 40 s elapsed, about 40 s left",
        "FAILED 02_strides eve: wrong file name",
        "grading: 3/4 done (02_strides ada), 2 failed, 4 min 0 s elapsed, about 1 min 20 s left",
    ]


def test_a_terminal_gets_a_bar_and_failures_above_it():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    with Progress(3, "build", stream=out) as progress:
        assert progress.bar is not None
        progress.done("01_tensor")
        progress.done("02_strides", failure="generate_assignment failed")
    text = out.getvalue()
    assert "FAILED 02_strides: generate_assignment failed" in text
    assert "build: 2/3" in text and "1 failed" in text
    assert "done (" not in text  # no plain lines on a terminal


def test_durations_read_as_seconds_minutes_and_hours():
    assert [duration(s) for s in [0, 59.4, 61, 3599, 3600 + 125]] == ["0 s", "59 s", "1 min 1 s", "59 min 59 s", "1 h 2 min"]
