"""Files and the terminal: the one writer of files (temporary file, no links, rename into
place), the readers of the ``.npy`` points and ``.npz`` archives the commands take, and the
progress display of long work (elapsed time and ETA)."""

from .files import check_plot_path, save_figure, write_file
from .npzfile import read_npy, read_npz
from .progress import display, reporting

__all__ = ["check_plot_path", "display", "read_npy", "read_npz", "reporting", "save_figure",
           "write_file"]
