"""The shared contract: API group, annotation and label keys, resource names.

Every key the project reads or writes on a Kubernetes object is spelled here and nowhere else.
``webhooks`` and ``discovery`` import this module; it imports nothing from the project.
"""

from __future__ import annotations

from typing import Final

# --- API group of our custom resources -------------------------------------------------------
GROUP: Final = "scheduling.infini-ai.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

# plural resource names (URL path segments) and kinds
QUOTAS: Final = "quotas"
NODETOPOLOGIES: Final = "nodetopologies"
PODGROUPS: Final = "podgroups"
QUEUES: Final = "queues"
JOBQUEUES: Final = "jobqueues"

KIND_QUOTA: Final = "Quota"
KIND_NODETOPOLOGY: Final = "NodeTopology"
KIND_PODGROUP: Final = "PodGroup"
KIND_QUEUE: Final = "Queue"
KIND_JOBQUEUE: Final = "JobQueue"

SCHEDULER_NAME: Final = "sky-scheduler"

PREFIX: Final = f"{GROUP}/"

# --- pod annotations -------------------------------------------------------------------------
ANNO_QUOTA_NAME: Final = PREFIX + "quota-name"
"""The quota a pod claims (hop ①). Source of truth for the claim."""
ANNO_QUOTA_NODE: Final = PREFIX + "quota-node"
"""Written by the binder on pending pods once their quota is bound (makes kube-scheduler re-queue)."""
ANNO_INHERIT_RESOURCE_FROM: Final = PREFIX + "inherit-resource-from"
"""Name of an earlier pod (same namespace) whose reservation this pod may take over."""
ANNO_ENABLE_TOPOLOGY: Final = PREFIX + "enable-topology-scheduling"
"""``"true"`` forces topology scheduling with strict index order, ``"false"`` turns it off."""
ANNO_TOPOLOGY_AFFINITY_KEY: Final = PREFIX + "topology-affinity-key"
"""Jobs sharing this key are pulled into the same RDMA zone."""
ANNO_TASK_INDEX: Final = PREFIX + "task-index"
ANNO_CLAIM_ENTRY: Final = PREFIX + "claim-entry"
"""Set by the webhook on a pod it chose a quota for: the uid of the in-flight entry it recorded on
that Quota (``admission:<request uid>``). The pod's claim accounts for exactly that entry when it
arrives — a ``generateName`` pod's name is not known at admission."""
ANNO_HIGHEST_TIER_ALLOWED: Final = PREFIX + "highest-tier-allowed"
"""Highest topology tier the job may span: a number (0 NVLink domain, 1 leaf, 2 spine, 3 core …)
or a name (``nvlink``/``accelerator``, ``leaf``, ``spine``, ``core``). PodGroup ``spec.topology``
wins over it."""
ANNO_TOPOLOGY_MODE: Final = PREFIX + "topology-mode"
"""``hard`` (never place above the highest tier allowed: the job waits) or ``soft`` (default:
prefer it, fall back upward)."""
ANNO_KUEUE_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-required-topology"
"""Kueue spelling: a topology node label key; the job must stay inside one unit of its tier (hard)."""
ANNO_KUEUE_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
"""Kueue spelling: a topology node label key; the job prefers one unit of its tier (soft)."""
ANNO_KAI_REQUIRED_PLACEMENT: Final = "kai.scheduler/topology-required-placement"
"""KAI-Scheduler spelling of the Kueue required form (a node label key; hard)."""
ANNO_KAI_PREFERRED_PLACEMENT: Final = "kai.scheduler/topology-preferred-placement"
"""KAI-Scheduler spelling of the Kueue preferred form (a node label key; soft)."""
ANNO_REQUIRED_MOUNT_POINTS: Final = PREFIX + "required-mount-points"
"""Comma-separated mount-point ids a pod needs ready on its node (storage plugin)."""
ANNO_QUEUE_NAME: Final = PREFIX + "queue-name"
"""Queue of a job without a PodGroup (a pod is a job of one)."""
ANNO_SPOT_POOL: Final = PREFIX + "spot-pool"
"""Spot pods: ``shared`` (low-power, GPUs shared by several pods) or ``exclusive`` (default)."""
ANNO_SCHEDULING_REASON: Final = PREFIX + "scheduling-reason"
"""Why the webhook could not choose a quota at admission (the loop takes over)."""
ANNO_REQUIRED_QUOTA: Final = PREFIX + "required-quota"
"""The quota the pod's creator named (the "required" tier): written by the webhook beside
``quota-name`` when the named quota has room, alone when it has none (the pod then waits for it).
The scheduler never gives such a pod another quota."""
ANNO_BIND_DECISION: Final = PREFIX + "bind-decision"
"""Written with the Binding: which path placed the pod (quota / inline-quota / spot)."""

# Volcano / scheduler-plugins group key, so Volcano- and Kubeflow-style pods work unchanged.
ANNO_GROUP_NAME: Final = "scheduling.k8s.io/group-name"

# Labels that frameworks put on pods carrying the replica index, most specific first.
TASK_INDEX_LABELS: Final[tuple[str, ...]] = (
    ANNO_TASK_INDEX,
    "training.kubeflow.org/replica-index",
    "batch.kubernetes.io/job-completion-index",
    "jobset.sigs.k8s.io/job-index",
    "leaderworkerset.sigs.k8s.io/worker-index",
    "volcano.sh/task-index",
)

# --- namespace label -------------------------------------------------------------------------
LABEL_INJECT: Final = PREFIX + "inject"
"""Namespaces labelled ``<this>=enabled`` get GPU/RDMA pods routed to sky-scheduler."""
LABEL_INJECT_ENABLED: Final = "enabled"

# --- node annotations and labels -------------------------------------------------------------
ANNO_NODE_INDEX: Final = PREFIX + "node-index"
ANNO_RDMA_TOPOLOGY_KEY: Final = PREFIX + "rdma-topology-key"
"""Operator override of a node's RDMA zone key."""
LABEL_ZONE: Final = "zone"
"""Written by the discovery agents: md5 of the node's sorted switch names."""
ANNO_TIER_PREFIX: Final = PREFIX + "tier-"
"""Node annotations ``<this>N`` (``scheduling.infini-ai.com/tier-2``): operator override of the
name of the node's tier-N unit (0 NVLink domain, 1 leaf, 2 spine, 3 core …)."""
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
ANNO_SPOT_SHARED: Final = PREFIX + "spot-shared"
"""Node annotation: how many spot GPUs form the shared (low-power) pool; the rest are exclusive."""

DEFAULT_GPU_SPEC_LABELS: Final[tuple[str, ...]] = (
    "nvidia.com/gpu.product",
    PREFIX + "gpu-spec",
    "spec-prefix",
)
"""Node label keys that name the GPU model, tried longest key first."""

DEFAULT_TIER_LABELS: Final[tuple[tuple[int, str], ...]] = (
    (0, "nvidia.com/gpu.clique"),
    (0, "network.topology.nvidia.com/accelerator"),
    (0, "accelerator.topograph.run/domain"),
    (1, "network.topology.nvidia.com/leaf"),
    (1, "fabric.topograph.run/tier-0"),
    (2, "network.topology.nvidia.com/spine"),
    (2, "fabric.topograph.run/tier-1"),
    (3, "network.topology.nvidia.com/core"),
    (3, "fabric.topograph.run/tier-2"),
    (4, "fabric.topograph.run/tier-3"),
)
"""(tier, node label key) read for a node's topology tiers, the first key present winning within a
tier: the GPU operator's NVLink clique and NVIDIA Topograph's labels (0.x ``network.topology``,
1.x ``fabric.topograph.run/tier-N`` whose tier 0 is the leaf, so its tier N is our tier N+1)."""

STORAGE_CONDITION_PREFIX: Final = "infiniai-fs-"
"""Node condition type ``infiniai-fs-<mount-point-id>`` reports a mount point ready."""

# --- resource names --------------------------------------------------------------------------
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
RESOURCE_PODS: Final = "pods"
RESOURCE_GPU: Final = "nvidia.com/gpu"
DEFAULT_GPU_RESOURCES: Final = (RESOURCE_GPU,)
"""What ``--gpu-resources`` defaults to: the accelerators quotas and plugins count as GPUs."""
RESOURCE_RDMA_HCA: Final = "rdma/hca"
RESOURCE_RDMA_ROCE: Final = "rdma/roce"
RDMA_RESOURCE_PREFIX: Final = "rdma/"
RESOURCE_SPOT_GPU: Final = PREFIX + "spot-gpu"

# --- zone keys -------------------------------------------------------------------------------
ZONE_PREFIX_ROCE: Final = "roce#"
ZONE_PREFIX_IB: Final = "ib#"

# --- events / leases -------------------------------------------------------------------------
COMPONENT: Final = "sky-scheduler"
DEFAULT_BINDER_LEASE: Final = "sky-scheduler-binder"
DEFAULT_IB_LEASE: Final = "sky-scheduler-ib-collector"
