"""Tests of the CustomResourceDefinitions in ``crds/`` and of the example objects in ``examples/api/``."""
