"""What both discovery agents share: the NodeTopology spec model, the sink protocol and its
implementations, subprocess running, one-line-per-condition logging, Kubernetes reads."""
