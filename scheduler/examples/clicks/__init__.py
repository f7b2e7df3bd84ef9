"""A day of click events: hourly cleaning in PySpark, then a daily rollup (see the docs)."""
