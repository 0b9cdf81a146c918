"""Tests of the documentation site: strict build and executed code snippets."""
