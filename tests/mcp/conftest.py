"""The MCP tests reuse the API tests' server fixture (uvicorn on loopback, both databases)."""

from tests.api.conftest import api  # noqa: F401 - re-exported as this package's fixture
