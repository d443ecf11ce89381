"""A template third-party paramgeo plugin package (see README.md)."""

from .tanh_net import TanhNet

__all__ = ["TanhNet"]
