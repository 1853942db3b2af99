"""The embedded default: a local cluster (emulator + the real service), scenarios, the simulator and the sandbox."""
