"""Other libraries' private names that echo-tools cannot avoid, one module per library.

Each module names the versions its names are known in, and a test (tests/echo_tools/test_compat_*.py)
fails when an installed version no longer has them. Nothing outside these modules touches a private name
of another package.
"""
