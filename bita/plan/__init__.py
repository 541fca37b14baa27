"""Which draft tree pays on this device: measured pass costs, acceptance forecasts from draft ranks,
the auto tree, and the plan a request runs with."""
