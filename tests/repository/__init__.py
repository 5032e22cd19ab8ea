"""Checks of the repository itself: CI script, imports an editor follows, suite style, documented examples, the GitHub Action."""
