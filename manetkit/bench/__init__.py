"""Benchmarks and experiments: ``manetkit bench NAME``; each prints a table and writes JSON."""
