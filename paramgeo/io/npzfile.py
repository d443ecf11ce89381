"""Reading the ``.npy`` points and ``.npz`` archives the commands take, with readable errors.

One reader for each kind of file: a missing file, a directory, an empty or truncated file, a
file of the other kind (an ``.npz`` archive for a point, a plain ``.npy`` array for data), text,
a pickle, and arrays that are not real numbers each raise a
:class:`~paramgeo.errors.ShapeError` naming the file and the fix, never a numpy traceback. The
``.npy`` header (shape and dtype) is read and checked *before* the data, so a header declaring
10^11 entries is refused without allocating them.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from ..errors import ParamgeoError, ShapeError

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: Real-number dtype kinds a data array may hold: bool, signed and unsigned integers, floats (not
#: complex 'c', strings, objects, datetime64 'M' or timedelta64 'm').
REAL_KINDS = "biuf"
#: The most entries one array of an .npz archive may declare (400 MB of float64); a point file
#: is checked against the plugin's n instead.
MAX_ENTRIES = 50_000_000


def read_npy(path: Union[str, os.PathLike], what: str = "point file",
             hint: str = "save a float array with numpy.save",
             check: Optional[Callable[[tuple[int, ...]], Optional[str]]] = None,
             kinds: str = "iuf", subject: str = "it") -> NDArray[Any]:
    """The array stored in the ``.npy`` file ``path``, read only after its header passed.

    The header (format version, dtype, shape) is read first: a file that is empty, truncated
    or not an ``.npy`` array (an ``.npz`` archive, text, a pickle) is refused; so is a dtype
    whose kind is not in ``kinds`` (default: integers and floats, so no bool, complex, strings,
    objects, datetime64 or timedelta64; ``subject`` names what must be real in the message),
    and a shape that ``check`` (a callable: shape -> an
    error text, or None when it fits) objects to, all before any data is allocated. Raises
    ParamgeoError for a missing file and ShapeError for anything else.
    """
    from numpy.lib import format as npformat

    p = _existing(path, what)
    if zipfile.is_zipfile(p):
        raise ShapeError(f"{what} {str(path)!r} is an .npz archive; {hint} (a single .npy "
                         "array)")
    with open(p, "rb") as f:
        try:
            shape, dtype = _header(f)
        except (ValueError, OSError, EOFError) as exc:
            state = "is empty" if p.stat().st_size == 0 else f"is not a readable .npy array ({exc})"
            raise ShapeError(f"{what} {str(path)!r} {state}; {hint}") from None
    if dtype.kind not in kinds:
        raise ShapeError(f"{what} {str(path)!r} holds {dtype} values; {subject} must be real "
                         f"numbers ({hint})")
    problem = check(shape) if check is not None else None
    if problem:
        raise ShapeError(f"{what} {str(path)!r} holds shape {shape}; {problem}")
    try:
        return np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ShapeError(f"{what} {str(path)!r} is truncated or unreadable ({exc}); {hint}") \
            from None


def _header(f):
    """(shape, dtype) from the header of the .npy stream ``f`` (nothing else is read)."""
    from numpy.lib import format as npformat

    readers = {(1, 0): npformat.read_array_header_1_0, (2, 0): npformat.read_array_header_2_0}
    version = npformat.read_magic(f)
    if version not in readers:
        raise ValueError(f"unsupported .npy format version {version}")
    shape, _, dtype = readers[version](f)
    return shape, dtype


def _existing(path, what):
    p = Path(path)
    if not p.is_file():
        kind = "is a directory" if p.is_dir() else "does not exist"
        raise ParamgeoError(f"{what} {str(path)!r} {kind}")
    return p


def read_npz(path: Union[str, os.PathLike], what: str = "data file",
             hint: str = "write it with numpy.savez") -> dict[str, NDArray[Any]]:
    """The arrays of the ``.npz`` archive ``path`` as a dict name -> ndarray.

    ``what`` names the file in messages (``"posterior file"``), ``hint`` says how to write a
    valid one. Raises ParamgeoError for a missing file and ShapeError for anything unreadable;
    headers are read first, so an array declaring more than ``MAX_ENTRIES`` entries is refused
    before it is allocated; arrays of strings, objects, complex numbers, datetimes or timedeltas
    are refused (the names are reported).
    """
    p = _existing(path, what)
    if not zipfile.is_zipfile(p):
        npy = " (it is a single .npy array)" if _is_npy(p) else ""
        raise ShapeError(f"{what} {str(path)!r} is not an .npz archive{npy}; {hint}")
    try:
        with zipfile.ZipFile(p) as archive:
            for member in archive.namelist():
                with archive.open(member) as f:
                    shape, _ = _header(f)
                if math.prod(shape) > MAX_ENTRIES:
                    raise ShapeError(
                        f"{what} {str(path)!r}: array {member.removesuffix('.npy')} declares "
                        f"shape {shape}, {math.prod(shape):.3g} entries, more than paramgeo "
                        f"reads ({MAX_ENTRIES:.3g}); {hint}")
        with np.load(p, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except ShapeError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ShapeError(f"{what} {str(path)!r} is not a readable .npz archive ({exc}); "
                         f"{hint}") from None
    bad = [k for k, a in arrays.items() if a.dtype.kind not in REAL_KINDS]
    if bad:
        raise ShapeError(f"{what} {str(path)!r}: array(s) {', '.join(bad)} must hold real "
                         f"numbers, got dtype {arrays[bad[0]].dtype}; {hint}")
    return arrays


def _is_npy(path):
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"
