"""The rule table (cause -> optimization) as TOML data, its loader and schema check."""
