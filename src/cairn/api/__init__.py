"""The HTTP API: a thin FastAPI surface over the service; see ``app.create_app``."""
