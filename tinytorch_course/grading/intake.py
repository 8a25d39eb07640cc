"""Collecting submissions safely: nbgrader's own collect routes, with plugins that trust nothing in
a submission (configured in nbgrader_config.py).

* `SafeExtractor` (nbgrader's zip_collect extractor): unpacks archives, and archives inside them,
  without links, without mode bits, without paths that leave the folder, within size limits. It
  notes where each file came from (`origins`): the LMS archive it was in and its time, which is
  the LMS archive's own entry time (for a file from an archive inside it, the entry time of that
  archive: a learner writes the dates inside their own archive), or the collector's clock for a
  file that was in no archive.
* `RosterCollector` (zip_collect's collector): a file counts only for a learner on the roster whose
  id its name carries, and only if no folder on its path in the LMS archive belongs to another
  learner (an LMS archive puts each learner's uploads in a folder of their own, `<id>` or
  `<id>_...`; a nested archive named for a learner is such a folder too). In an archive that has
  such upload areas, every folder at their level is one: a file in an upload area that is no
  roster learner's counts for no one. Its timestamp is the one `SafeExtractor` noted.
* `TrustedExchangeCollect` (nbgrader's exchange collect): skips a submission whose folder is not
  owned by the learner it names, takes its time from the folder's change time (the learner can set
  a folder's name and modification time, not its change time), and copies regular files only.
* `collect_folder`: `DIR/<student-id>/` (or `DIR/<student-id>/NN_name/`) holding `NN_name.ipynb`
  or `<student-id>_NN_name.ipynb` (what `./learn submit` writes).
* `sanitize` gives every collected submission plain files and folders (0644/0755).
"""
import datetime
import os
from pathlib import Path
import re
import shutil
import stat
import time
import zipfile

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from traitlets import Integer

STUDENT_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
MAX_NESTING = 3


def printable(text, limit=200):
    """`text` with control characters escaped and cut to `limit` characters (for summaries)."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def sanitize(folder):
    """Leave only regular files (0644) and folders (0755) under `folder`; returns what was
    removed (links, devices, FIFOs, sockets)."""
    removed = []
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                os.chmod(path, 0o755)
            elif stat.S_ISREG(mode):
                os.chmod(path, 0o644)
            else:
                os.unlink(path)
                removed.append(os.path.relpath(path, folder))
    os.chmod(folder, 0o755)
    return removed


def copy_regular_files(source, destination):
    """Copy the regular files and folders of `source` (never following a link) to `destination`."""
    for top, dirs, files in os.walk(source):
        relative = os.path.relpath(top, source)
        os.makedirs(os.path.join(destination, relative), mode=0o755, exist_ok=True)
        for name in files:
            path = os.path.join(top, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                shutil.copyfile(path, os.path.join(destination, relative, name), follow_symlinks=False)
    sanitize(destination)


def write_timestamp(folder, when):
    """nbgrader's `timestamp.txt`, written by the collector (a submitted one is replaced)."""
    path = Path(folder) / "timestamp.txt"
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z"))


# ---------------------------------------------------------------- LMS archives (zip_collect)


class SafeExtractor(ExtractorPlugin):
    """Unpack LMS archives: regular files only, no mode bits, nothing outside the target, limits."""

    max_file_mb = Integer(64, help="largest file taken from an archive").tag(config=True)
    max_total_mb = Integer(2048, help="most taken from all archives together").tag(config=True)

    def extract(self, archive_path, extracted_path):
        """Unpack every archive of `archive_path` into a folder of its name in `extracted_path` (and
        copy the other files); `origins` then maps each file written to `(the folder of its LMS
        archive, or None, its time in seconds)`."""
        self._left = self.max_total_mb << 20
        self.origins = {}
        for top, _, names in os.walk(archive_path):
            target = Path(extracted_path) / os.path.relpath(top, archive_path)
            for name in sorted(names):
                path = Path(top) / name
                if path.is_symlink() or not path.is_file():
                    continue
                if zipfile.is_zipfile(path):
                    self._unzip(path, target / name, depth=1, lms=Path(os.path.normpath(target / name)))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target / name)
                    self.origins[os.path.normpath(target / name)] = (None, time.time())
        sanitize(extracted_path)

    def _unzip(self, archive, target, depth, lms, stamp=None):
        """Unpack `archive` into the folder `target` (an archive inside it into a folder named
        after it, down to MAX_NESTING levels). `lms` is the folder of the LMS archive; `stamp` the
        time of every file (None: each entry's own time, for the LMS archive itself)."""
        try:
            entries = zipfile.ZipFile(archive).infolist()
        except (zipfile.BadZipFile, OSError) as error:
            self.log.warning("not an archive %s: %s", archive, error)
            return
        with zipfile.ZipFile(archive) as z:
            for entry in entries:
                kind = (entry.external_attr >> 16) & 0o170000
                parts = Path(entry.filename).parts
                if (entry.is_dir() or kind not in (0, stat.S_IFREG) or not parts
                        or Path(entry.filename).is_absolute() or ".." in parts):
                    continue
                if entry.file_size > self.max_file_mb << 20 or entry.file_size > self._left:
                    self.log.warning("left out %s in %s: too large", entry.filename, archive)
                    continue
                destination = target.joinpath(*parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with z.open(entry) as source, open(destination, "wb") as out:
                    shutil.copyfileobj(source, out, length=1 << 20)
                self._left -= entry.file_size
                when = datetime.datetime(*entry.date_time).timestamp() if stamp is None else stamp
                os.utime(destination, (when, when))
                if depth < MAX_NESTING and zipfile.is_zipfile(destination):
                    nested = destination.with_name(destination.name + ".contents")
                    self._unzip(destination, nested, depth + 1, lms, when)
                    destination.unlink()
                else:
                    self.origins[os.path.normpath(destination)] = (lms, when)


class RosterCollector(FileNameCollectorPlugin):
    """`<student-id>_NN_name.ipynb` for a learner on the roster, in no other learner's folder.

    `collected` lists what it accepted, `problems` what it did not and why (readable lines)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.collected, self.problems = [], []

    def collect(self, submitted_file):
        shown = printable(os.path.relpath(submitted_file, self._extracted(submitted_file)))
        found = super().collect(submitted_file) if submitted_file.endswith(".ipynb") else None
        if not found:
            if submitted_file.endswith(".ipynb"):
                self.problems.append(f"{shown}: the name is not <student-id>_NN_name.ipynb")
            return None
        student = found["student_id"]
        if not STUDENT_ID.match(student) or student not in self._roster():
            self.problems.append(f"{shown}: no learner {printable(student)!r} on the roster")
            return None
        path = os.path.normpath(submitted_file)
        lms, stamp = self._origins()[path]
        folders = Path(path).relative_to(lms).parts[:-1] if lms else ()
        owners = {self._owner(folder) for folder in folders} - {None}
        if owners - {student}:
            self.problems.append(f"{shown}: named for {student}, but in the folder of "
                                 f"{', '.join(sorted(owners - {student}))}")
            return None
        level = self._upload_level(lms) if lms else None
        if level is not None and len(folders) > level and self._owner(folders[level]) is None:
            self.problems.append(f"{shown}: named for {student}, but in the upload area "
                                 f"{printable(folders[level])!r} of no learner on the roster")
            return None
        if any(c["student_id"] == student and c["file_id"] == found["file_id"] for c in self.collected):
            self.problems.append(f"{shown}: {student} handed in this notebook more than once "
                                 "(the newest counts)")
        when = datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc)
        found = dict(found, timestamp=when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
        self.collected.append(found)
        return found

    def _origins(self):
        extractor = getattr(self.parent, "extractor_plugin_inst", None)
        if not isinstance(extractor, SafeExtractor):
            raise TypeError("RosterCollector takes each file's origin from SafeExtractor: set "
                            "c.ZipCollectApp.extractor_plugin = 'tinytorch_course.grading.intake.SafeExtractor'")
        return extractor.origins

    def _owner(self, folder):
        """The roster learner whose upload area `folder` is (`<id>` or `<id>_...`), or None."""
        learner = folder.split("_")[0]
        return learner if learner in self._roster() else None

    def _upload_level(self, lms):
        """How deep the learners' upload areas are in the LMS archive unpacked at `lms`: the first
        level of folders at which a roster learner has one (None: the archive has none)."""
        levels = [index for path, (origin, _) in self._origins().items() if origin == lms
                  for index, folder in enumerate(Path(path).relative_to(lms).parts[:-1])
                  if self._owner(folder)]
        return min(levels, default=None)

    @staticmethod
    def _extracted(path):
        parts = Path(path).parts
        return str(Path(*parts[:parts.index("extracted") + 1])) if "extracted" in parts else "/"

    def _roster(self):
        if not hasattr(self, "_ids"):
            from nbgrader.api import Gradebook

            with Gradebook(self.config.CourseDirectory.db_url) as gradebook:
                self._ids = {s.id for s in gradebook.students}
        return self._ids


# ---------------------------------------------------------------- nbgrader's exchange


class TrustedExchangeCollect(ExchangeCollect):
    """nbgrader's exchange collect that believes neither a submission's name nor its contents."""

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        info = os.lstat(os.path.join(self.inbound_path, record["filename"]))
        record["timestamp"] = datetime.datetime.fromtimestamp(info.st_ctime, datetime.timezone.utc)
        record["owner_ok"] = stat.S_ISDIR(info.st_mode) and self._owned_by(info.st_uid, record["username"])
        return record

    def init_src(self):
        super().init_src()
        for record in self.src_records:
            if not record["owner_ok"]:
                self.log.error("not collected: %s is not owned by the learner it names",
                               printable(record["filename"]))
        self.src_records = [r for r in self.src_records if r["owner_ok"]]

    def _owned_by(self, uid, username):
        import pwd

        if not self.check_owner or uid == os.geteuid():  # the instructor's own (a learner cannot make one)
            return True
        try:
            return pwd.getpwuid(uid).pw_name == username
        except KeyError:
            return False

    def do_copy(self, src, dest):
        copy_regular_files(src, dest)


# ---------------------------------------------------------------- a folder per learner


def collect_folder(root, module_id, folder, roster):
    """Copy `folder/<student-id>/` (or its `NN_name/` subfolder) to submitted/<student>/NN/, with
    `<student-id>_NN_name.ipynb` renamed `NN_name.ipynb`. Returns `(collected ids, problems)`."""
    collected, problems = [], []
    for learner in sorted(Path(folder).iterdir()):
        name = printable(learner.name)
        if learner.is_symlink() or not learner.is_dir():
            problems.append(f"{name}: not a folder (links are not followed)")
            continue
        if not STUDENT_ID.match(learner.name) or learner.name not in roster:
            problems.append(f"{name}: no such learner on the roster")
            continue
        source = learner / module_id
        source = source if source.is_dir() and not source.is_symlink() else learner
        target = Path(root) / "submitted" / learner.name / module_id
        if target.exists():
            shutil.rmtree(target)
        copy_regular_files(source, target)
        submitted = target / f"{learner.name}_{module_id}.ipynb"
        if submitted.is_file() and not (target / f"{module_id}.ipynb").exists():
            submitted.rename(target / f"{module_id}.ipynb")
        notebook = source / f"{module_id}.ipynb"
        notebook = notebook if notebook.is_file() else source / f"{learner.name}_{module_id}.ipynb"
        when = os.lstat(notebook).st_mtime if notebook.is_file() and not notebook.is_symlink() else None
        write_timestamp(target, datetime.datetime.fromtimestamp(when or datetime.datetime.now().timestamp(),
                                                                datetime.timezone.utc))
        collected.append(learner.name)
    return collected, problems
