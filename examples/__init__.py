"""Example programs that use kpurgatory as a library user would; docs/tutorial.md explains them."""
