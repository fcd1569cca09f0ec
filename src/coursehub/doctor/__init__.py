"""``coursehub doctor``: a preflight that names what would break, where, and what to do."""
