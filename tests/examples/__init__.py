"""Tests that run the programs under examples/ as a user would."""
