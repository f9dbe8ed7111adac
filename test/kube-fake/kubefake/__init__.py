"""kube-fake: a fake Kubernetes API server for paidb's tests (stdlib only)."""
