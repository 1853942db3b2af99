"""The CRD generator: the five CustomResourceDefinitions of ``scheduling.infini-ai.com`` built as dicts.

``generate.py`` is the entry point (``python crds/generate.py``); one module per kind (``quotas``,
``nodetopologies``, ``podgroups``, ``queues``, ``jobqueues``, named like the YAML files they produce)
builds that kind's schema from the shared pieces in ``openapi`` (JSON types), ``kube_types``
(Kubernetes types) and ``definition`` (the CRD envelope); ``api_docs`` renders the field tables of
docs/api.md. Only the standard library and PyYAML are used; the scheduler package is not imported.
"""
