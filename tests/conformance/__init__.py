"""Conformance tests: the step language, the driver, and the committed vectors."""
