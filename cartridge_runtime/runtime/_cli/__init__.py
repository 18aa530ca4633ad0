"""CLI mode: a cartridge script run with arguments is a command-line tool."""
