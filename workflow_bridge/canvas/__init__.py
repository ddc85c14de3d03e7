"""What `NodeMapper` (workflow_bridge/node_mapper.py) uses to read a canvas: `entries` (tool entries of any
shape -> tool ids and bindings, per-node-type config), one module per entry kind that binds a tool of its
own (`code_entries`, `mcp_entries`, `subworkflow_entries`), `graph` (execution model, cycles) and
`reverse` (a stored workflow back to the canvas payload).
"""
