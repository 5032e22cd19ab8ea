"""Self-tests of the Kubernetes API layer (fixtures/kube/)."""
