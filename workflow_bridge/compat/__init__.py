"""Other libraries' private names the bridge cannot avoid, one module per library, each with the versions
it is known in and a test (tests/workflow_bridge/test_compat_*.py) that fails when a name changes."""
