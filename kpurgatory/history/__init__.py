"""A history checker (work in progress)."""
