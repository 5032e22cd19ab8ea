"""Self-tests of clusters/install/: installing and verifying KAI, JobSet and Trainer, with their CRDs and evidence."""
