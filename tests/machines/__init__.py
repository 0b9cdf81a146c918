"""Hypothesis state machines: implementations against brute-force models or the reference."""
