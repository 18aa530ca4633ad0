"""cartridge-runtime: write, run, drive and certify Bifaci v6 cartridges in Python."""

from ._version import __version__

__all__ = ("__version__",)
