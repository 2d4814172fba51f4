"""The HTTP API (issue 6): a thin FastAPI surface over the service; see ``app.create_app``."""
