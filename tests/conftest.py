"""Shared set-up of the whole suite: the folders mirror the package (``tests/engine/`` for
``cartridge_runtime/engine/``...), ``tests/house/`` holds the structure, vocabulary, typing,
README and packaging checks, and the helper modules (``_engine_helpers.py``, vector readers,
generators) live here at the top, importable from every folder (this file's folder is on
``sys.path``)."""
