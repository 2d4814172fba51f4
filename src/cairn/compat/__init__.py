"""Compatibility surfaces: other tools' command contracts served over Cairn's service."""
