"""Tool modules used by the executor tests (the tests' registries allow `tests.echo_tools.fixture_tools`)."""
