"""HTTP edges: the extender verbs and the operations endpoints (diagnose, metrics, health)."""
