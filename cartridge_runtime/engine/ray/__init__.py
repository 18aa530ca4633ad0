"""Cartridges on a Ray cluster: ``engine.add_cartridge("ml.py", placement=RayPlacement(...))``.

Each instance is a Ray actor that owns the cartridge's process on its node; the engine on the
driver keeps routing, manifests, pools, credit, cancel and retries, and only bytes cross the
cluster (see :mod:`._instance` for how both directions stay bounded). Needs the ``ray`` extra
(``pip install 'cartridge-runtime[ray]'``) and the asyncio backend. Importing this package does
not import Ray; making a :class:`RayPlacement` checks that it is installed.
"""

from __future__ import annotations

from ._placement import INIT_TIMEOUT, RayPlacement

__all__ = ("RayPlacement", "INIT_TIMEOUT")
