"""Capture from GitHub: review comments become attributed candidate lessons (docs/webhooks.md)."""
