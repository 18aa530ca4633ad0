"""One cartridge connection over :class:`~cartridge_runtime.protocol.HostConnection`: start-up,
health, stderr, the admission gate, counters, the direct connection and the frame tap."""
