"""Small traces shipped with Hermes for the demo and the docs."""
