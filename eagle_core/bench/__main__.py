"""`python -m eagle_core.bench` runs the benchmark harness (see harness.py)."""
from .harness import main

main()
