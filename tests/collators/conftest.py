"""Hypothesis settings for the collator tests: enough cases, bounded time."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "collators", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
