"""The engine's relay shells: its switch (hosts attached to it) and its host side (the
engine serving a switch)."""
