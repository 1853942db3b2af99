"""Pure domain model: resources, nodes with their two ledgers, quotas, tasks, jobs, queues.

No I/O, no Kubernetes client; ``extender.cache.convert`` (custom resources: ``convert_crds``) is the only
translation from API JSON.
"""
