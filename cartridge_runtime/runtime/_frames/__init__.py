"""Frame mode: one CBOR-mode session over :class:`~cartridge_runtime.protocol.CartridgeConnection`,
its handler runner and its writer."""
