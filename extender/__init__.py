"""Sky-Scheduler: topology- and quota-aware scheduling for AI training on Kubernetes.

The ``extender`` package holds the scheduler proper: the domain model (``model``), the
Volcano-style framework (``framework``), plugins and actions, the informer cache, the single API
writer (``kube``), the quota-binder loop, the extender HTTP API, diagnose, the Kubernetes API
emulator and the simulator.
"""

__version__ = "0.1.0"
