"""The one way paramgeo writes a file (definitions, sweep tables, journals and locks, plots).

The rules (docs/reliability.md):

1. New content goes to a fresh temporary file, created exclusively (``O_CREAT | O_EXCL |
   O_NOFOLLOW``, a random name ``.TARGET.XXXX.tmp``) in the target's own folder: never an
   existing file, never through a link. It is written, flushed and synced, given the mode a
   plain ``open()`` would give (0666 less the umask), then renamed over the target
   (``os.replace``): a reader sees the old file or the new one, never half of one, and the
   rename replaces a directory entry; it never writes into the file the target named.
2. The target is refused when it is a symbolic link, not a regular file, or a regular file with
   other hard links; an existing target is replaced only when it is recognised as paramgeo's
   (the caller's test) or the caller has already checked it (``replace=True``).
3. A file that grows in place (the sweep journal) or is held open (the sweep lock) is opened
   with ``O_NOFOLLOW``; it is created exclusively when absent, and when it exists it is used
   only if it is a regular file with one link that the caller recognises as paramgeo's.

Every refusal is an :class:`UnsafeFileError` naming the file, what is wrong and the fix.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Union

from ..errors import ParamgeoError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafeFileError(ParamgeoError):
    """paramgeo refused to write or read a file: a link, not a regular file, a file with other
    hard links, or an existing file paramgeo did not write."""


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _refuse_entry(path, st, what):
    """Raise UnsafeFileError unless ``st`` (an lstat of ``path``) is a regular file with one
    link."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFileError(f"the {what} {str(path)!r} is a symbolic link; paramgeo does not "
                              "write or read its files through links: remove it or give "
                              "another name")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"the {what} {str(path)!r} is not a regular file; remove it or "
                              "give another name")
    if st.st_nlink > 1:
        raise UnsafeFileError(f"the {what} {str(path)!r} has {st.st_nlink} hard links (another "
                              "name shares its content); paramgeo does not write through hard "
                              "links: remove it or give another name")


def check_target(path: Union[str, os.PathLike], *, what: str,
                 replace: Union[bool, Callable[[Any], bool]] = False) -> None:
    """Refuse (UnsafeFileError) to put a file at ``path`` unless nothing is there, or a regular
    file with one link that paramgeo may replace: ``replace`` is False (never), True (the
    caller has checked it is paramgeo's) or a test ``replace(path) -> bool``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _refuse_entry(path, st, what)
    if replace is True or (callable(replace) and replace(path)):
        return
    raise UnsafeFileError(f"the {what} {str(path)!r} exists and was not written by paramgeo; "
                          "paramgeo does not overwrite other files: remove it or give another "
                          "name")


def write_file(path: Union[str, os.PathLike], content: Union[bytes, str, Callable[[Any], Any]], *,
               what: str = "file", replace: Union[bool, Callable[[Any], bool]] = False) -> Path:
    """Write ``content`` (bytes, str as UTF-8, or a function ``content(fh)`` writing to a binary
    file object) to ``path`` by the rules of this module: checked target, exclusive temporary
    file in the same folder, synced, renamed into place. Returns ``path`` as a Path."""
    path = Path(path)
    check_target(path, what=what, replace=replace)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UnsafeFileError(f"cannot write the {what} {str(path)!r}: {exc.strerror} in the "
                              f"folder {str(path.parent)!r}; give a path in a folder you can "
                              "write to") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # the mode a plain open() gives, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content.encode("utf-8") if isinstance(content, str) else content)
            fh.flush()
            os.fsync(fh.fileno())
        check_target(path, what=what, replace=replace)  # again: it may have changed meanwhile
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def open_own(path: Union[str, os.PathLike], flags: int, *, what: str, create: bool = True,
             ours: Optional[Callable[[int], bool]] = None) -> int:
    """``os.open`` of a file paramgeo keeps open or appends to (a journal, a lock), by rule 3:
    created exclusively when absent (if ``create``); when present, opened without following a
    link and used only if it is a regular file with one link and ``ours(fd)`` (when given)
    accepts its content. Returns the file descriptor."""
    base = flags & ~(os.O_CREAT | os.O_EXCL)
    if create:
        try:
            return os.open(path, base | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o666)
        except FileExistsError:
            pass  # there is one: check it below
        except OSError as exc:
            raise UnsafeFileError(f"cannot create the {what} {str(path)!r}: {exc.strerror}"
                                  ) from None
    try:
        fd = os.open(path, base | os.O_NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse_entry(path, os.lstat(path), what)
        raise UnsafeFileError(f"cannot open the {what} {str(path)!r}: {exc.strerror}") from None
    try:
        _refuse_entry(path, os.fstat(fd), what)
        if ours is not None and not ours(fd):
            raise UnsafeFileError(f"the {what} {str(path)!r} exists and was not written by "
                                  "paramgeo; remove it or give another name")
    except BaseException:
        os.close(fd)
        raise
    return fd


#: the stamp paramgeo puts in the plots it writes (matplotlib metadata), by which it knows a
#: plot it may replace
PLOT_STAMP = "paramgeo plot"
_PLOT_KEYS = {".png": "Software", ".svg": "Creator", ".pdf": "Creator"}
_PLOT_MARKS = {".png": b"tEXtSoftware\x00" + PLOT_STAMP.encode(),
               ".svg": b"<dc:title>" + PLOT_STAMP.encode() + b"</dc:title>",
               ".pdf": b"/Creator (" + PLOT_STAMP.encode() + b")"}


def is_paramgeo_plot(path: Union[str, os.PathLike]) -> bool:
    """Whether the file at ``path`` carries paramgeo's plot stamp (in the first or last 16 kB,
    where matplotlib writes its metadata)."""
    mark = _PLOT_MARKS.get(Path(path).suffix.lower())
    if mark is None:
        return False
    with open(path, "rb") as fh:
        head = fh.read(16384)
        fh.seek(max(fh.seek(0, os.SEEK_END) - 16384, 0))
        return mark in head or mark in fh.read()


def check_plot_path(path: Union[str, os.PathLike]) -> Path:
    """``path`` as a Path if a plot can be written there (commands check this before their
    work starts): a .png, .svg or .pdf name in an existing folder where a file can be created,
    and nothing there but possibly a plot paramgeo wrote (:func:`check_target`)."""
    path = Path(path)
    if path.suffix.lower() not in _PLOT_KEYS:
        raise UnsafeFileError(f"cannot write a plot to {str(path)!r}: use a .png, .svg or .pdf "
                              "name")
    if not path.parent.is_dir():
        raise UnsafeFileError(f"cannot write a plot to {str(path)!r}: folder "
                              f"{str(path.parent)!r} does not exist")
    try:  # a file can be created there
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise UnsafeFileError(f"cannot write a plot to {str(path)!r}: {exc.strerror} in folder "
                              f"{str(path.parent)!r}; give a path in a folder you can write to"
                              ) from None
    check_target(path, what="plot", replace=is_paramgeo_plot)
    return path


def save_figure(fig: Any, path: Union[str, os.PathLike]) -> Path:
    """Save a matplotlib figure to ``path`` (.png, .svg or .pdf) through :func:`write_file`,
    stamped as paramgeo's, replacing only a plot paramgeo wrote."""
    path = check_plot_path(path)
    suffix = path.suffix.lower()
    fmt = suffix.lstrip(".")
    write_file(path, lambda fh: fig.savefig(fh, format=fmt, dpi=110,
                                            metadata={_PLOT_KEYS[suffix]: PLOT_STAMP}),
               what="plot", replace=is_paramgeo_plot)
    return path
