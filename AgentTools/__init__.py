"""Real tools that work out of the box, one folder each with a tool_manifest.json."""
