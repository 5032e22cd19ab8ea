"""Self-tests of clusters/: provisioning kind and kwok clusters, their nodes and GPUs, tool fetches, the cluster plugin."""
