"""Benchmarks: dsh beside its peers in one run. Run each as ``python -m bench.<name>``."""
