"""Figures and HTML built from BiTA step records and bench reports (pure functions, Plotly)."""
