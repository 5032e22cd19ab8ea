"""Self-tests of reports/: the run record, its views, comparisons and renderings."""
