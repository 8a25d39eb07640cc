"""nbgrader's exchange on the class hub, as the learners' servers run it (`./course hub` installs
this file into the servers' Python and names it in their nbgrader configuration).

nbgrader's submit leaves a submission folder open to every account (0777), hidden only by its
name. `PrivateSubmit` then closes it to all but its learner and the instructor's group: the
exchange's inbound folder is setgid to the instructor's group, so the submission folder belongs to
that group, and 0770 keeps every other account out of it (whatever the modes of the files in it).
"""
import os

from nbgrader.exchange.default.submit import ExchangeSubmit


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit, then the submission folder open to its learner and the instructor only."""

    def copy_files(self):
        super().copy_files()
        os.chmod(os.path.join(self.inbound_path, self.assignment_filename), 0o770)
