"""Everything that produces traces: monitor, fine-grained collector, launcher, importers."""
