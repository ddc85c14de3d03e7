"""Python tools that the adapter tests register in throw-away registries (allowed module: this package)."""
