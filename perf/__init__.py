"""Benchmarks (`make bench`); a package so the tests import its synthetic graph."""
