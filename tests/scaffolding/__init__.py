"""Test scaffolding shared by tests and benchmarks (never shipped: vantage_agent/ must not
import it; tests/unit/test_layout.py)."""
