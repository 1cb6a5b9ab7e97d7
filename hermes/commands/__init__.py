"""CLI commands, one module each. A module defines ``register(app)``; ``hermes.cli`` finds it.

A command is added only when it works (no placeholders).
"""
