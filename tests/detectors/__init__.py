"""Self-tests of the named detectors (suites/support/detectors/): each fires on a violating case and passes a conforming one."""
