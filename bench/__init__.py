"""Benchmarks: the README names the command; results go to bench/REPORT.md."""
