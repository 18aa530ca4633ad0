"""Graph runs on the engine: the session, its runner, and the grow-graph cap it answers."""
