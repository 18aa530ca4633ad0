"""Cartridges on a Ray cluster: ``engine.add_cartridge("ml.py", placement=RayPlacement(...))``.

Each instance is a Ray actor that owns the cartridge's process on its node; the engine on the
driver keeps routing, manifests, pools, credit, cancel and retries. Ray places and supervises
the actor; the bytes of calls go over a socket between the engine and the cartridge's process
(:mod:`._direct`), through Ray only where the engine cannot reach the node (:mod:`._instance`).
Needs the ``ray`` extra (``pip install 'cartridge-runtime[ray]'``) and the asyncio backend.
Importing this package does not import Ray; making a :class:`RayPlacement` checks that it is
installed.
"""

from __future__ import annotations

from ._placement import INIT_TIMEOUT, RayPlacement

__all__ = ("RayPlacement", "INIT_TIMEOUT")
