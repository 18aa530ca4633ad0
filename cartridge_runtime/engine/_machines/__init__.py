"""Machine runs over :meth:`Engine.call <cartridge_runtime.engine.Engine.call>`: the runner, its
events, scopes, inputs and reports."""
