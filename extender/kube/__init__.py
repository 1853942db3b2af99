"""Kubernetes plumbing: API client, informers, the single writer module, leader election.

``writer`` is the only module of the project that writes to the Kubernetes API.
"""
