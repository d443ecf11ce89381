"""Files in and out: the one writer of files (temporary file, no links, rename into place) and
the readers of the ``.npy`` points and ``.npz`` archives the commands take."""

from .files import check_plot_path, save_figure, write_file
from .npzfile import read_npy, read_npz

__all__ = ["check_plot_path", "read_npy", "read_npz", "save_figure", "write_file"]
