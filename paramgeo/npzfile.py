"""Reading the ``.npz`` archives the commands take (data, posteriors), with readable errors.

One reader for every command: a missing file, a directory, a file that is not an ``.npz``
archive (a plain ``.npy`` array, text, a pickle), and arrays that are not real numbers each raise
a :class:`~paramgeo.errors.ShapeError` naming the file and the fix, never a numpy traceback.
"""

import zipfile
from pathlib import Path

import numpy as np

from .errors import ParamgeoError, ShapeError


def read_npz(path, what="data file", hint="write it with numpy.savez"):
    """The arrays of the ``.npz`` archive ``path`` as a dict name -> ndarray.

    ``what`` names the file in messages (``"posterior file"``), ``hint`` says how to write a
    valid one. Raises ParamgeoError for a missing file and ShapeError for anything unreadable;
    arrays of strings, objects or complex numbers are refused (the names are reported).
    """
    p = Path(path)
    if not p.is_file():
        kind = "is a directory" if p.is_dir() else "does not exist"
        raise ParamgeoError(f"{what} {str(path)!r} {kind}")
    if not zipfile.is_zipfile(p):
        npy = " (it is a single .npy array)" if _is_npy(p) else ""
        raise ShapeError(f"{what} {str(path)!r} is not an .npz archive{npy}; {hint}")
    try:
        with np.load(p, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ShapeError(f"{what} {str(path)!r} is not a readable .npz archive ({exc}); "
                         f"{hint}") from None
    bad = [k for k, a in arrays.items() if a.dtype.kind not in "biuf"]
    if bad:
        raise ShapeError(f"{what} {str(path)!r}: array(s) {', '.join(bad)} must hold real "
                         f"numbers, got dtype {arrays[bad[0]].dtype}; {hint}")
    return arrays


def _is_npy(path):
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"
