"""Checks of the repository itself: CI script, imports an editor follows, the layers, suite style, documented examples, the GitHub Action."""
