"""The package's version, in a module of its own so that any module can read it without importing the
package's `__init__` (the HTTP API reports it; `echo_tools.__version__` is this one)."""

__version__ = "0.1.0"
