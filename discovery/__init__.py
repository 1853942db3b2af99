"""RDMA topology discovery: the per-node RoCE agent and the InfiniBand fabric collector."""
