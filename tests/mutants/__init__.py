"""Seeded mutants of the optimized implementation and the test that the machines catch them."""
