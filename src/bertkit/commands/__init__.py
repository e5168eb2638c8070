"""CLI subcommands: each module registers one command (family) via add_parser."""
