"""Hypothesis strategies for valid custom resources, written from the API contract.

They are deliberately *not* generated from the CRD schemas: they encode what the contract says an
object may look like (field names, types, ranges, enums), so a schema that is stricter than the
contract — a misspelt field, a wrong type, a missing enum value — rejects some generated object.
"""

from __future__ import annotations

import datetime as dt
import operator
import string
from typing import Any

from hypothesis import strategies as st

from .objects import API_VERSION

# ---- scalars --------------------------------------------------------------------------------
# Names are drawn as ``edge (inner{0,n} edge)?`` from character sets: the same strings as the
# regular expression in each comment, at a third of ``st.from_regex``'s cost per draw (these
# strategies draw dozens of names per object).

LOWER_DIGITS = string.ascii_lowercase + string.digits
ALNUM = string.ascii_letters + string.digits


def word(edge: str, inner: str, max_inner: int) -> st.SearchStrategy[str]:
    """``[edge]([inner]{0,max_inner}[edge])?``."""
    return st.tuples(
        st.sampled_from(edge), st.text(inner, max_size=max_inner), st.sampled_from(edge), st.booleans()
    ).map(lambda t: t[0] + (t[1] + t[2] if t[3] else ""))


def digits(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """``[0-9]{min_size,max_size}``."""
    return st.text(string.digits, min_size=min_size, max_size=max_size)


DNS_LABEL = word(LOWER_DIGITS, LOWER_DIGITS + "-", 14)  # [a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?
NAME = st.builds(".".join, st.lists(DNS_LABEL, min_size=1, max_size=2))
LABEL_KEY = st.one_of(
    word(LOWER_DIGITS, LOWER_DIGITS + "._-", 14),  # [a-z0-9]([a-z0-9._-]{0,14}[a-z0-9])?
    st.builds(lambda p, n: f"{p}/{n}", NAME, DNS_LABEL),
)
LABEL_VALUE = st.one_of(st.just(""), word(ALNUM, ALNUM + "._-", 14))  # ([a-zA-Z0-9]([a-zA-Z0-9._-]{0,14}[a-zA-Z0-9])?)?
RESOURCE_NAME = st.one_of(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "rdma/hca", "rdma/roce", "scheduling.infini-ai.com/spot-gpu"]),
    st.builds(lambda p, n: f"{p}/{n}", NAME, DNS_LABEL),
)
INT32 = st.integers(-(2**31), 2**31 - 1)
NON_NEGATIVE_INT32 = st.integers(0, 2**31 - 1)
TEXT = st.text(max_size=30)
_ZONES = st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=8)), dt.timezone(-dt.timedelta(hours=5, minutes=30))])
TIMESTAMP = st.datetimes(timezones=_ZONES).map(lambda d: d.isoformat().replace("+00:00", "Z"))

_DIGITS = digits(1, 6)
_NUMBER = st.one_of(
    _DIGITS,
    st.builds(lambda a, b: f"{a}.{b}", _DIGITS, digits(0, 4)),
    st.builds(lambda b: f".{b}", _DIGITS),
)
_SUFFIX = st.one_of(
    st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"]),
    st.builds(
        lambda e, sign, n: f"{e}{sign}{n}", st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 18)
    ),
)
QUANTITY = st.one_of(
    st.integers(0, 10**12),
    st.builds(lambda sign, n, s: f"{sign}{n}{s}", st.sampled_from(["", "+"]), _NUMBER, _SUFFIX),
)
RESOURCE_LIST = st.dictionaries(RESOURCE_NAME, QUANTITY, max_size=4)


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with any subset of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


def unique_list(elements: st.SearchStrategy[Any], **kw: Any) -> st.SearchStrategy[list[Any]]:
    return st.lists(elements, unique=True, max_size=kw.pop("max_size", 4), **kw)


# ---- shared Kubernetes types -------------------------------------------------------------------

SET_REQUIREMENT: st.SearchStrategy[dict[str, object]] = st.one_of(
    st.fixed_dictionaries(
        {
            "key": LABEL_KEY,
            "operator": st.sampled_from(["In", "NotIn"]),
            "values": st.lists(LABEL_VALUE, min_size=1, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {"key": LABEL_KEY, "operator": st.sampled_from(["Exists", "DoesNotExist"])},
        optional={"values": st.just([])},
    ),
)
NODE_REQUIREMENT = st.one_of(
    SET_REQUIREMENT,
    st.fixed_dictionaries(
        {
            "key": LABEL_KEY,
            "operator": st.sampled_from(["Gt", "Lt"]),
            "values": st.lists(INT32.map(str), min_size=1, max_size=1),
        }
    ),
)
LABEL_SELECTOR = optional(
    matchLabels=st.dictionaries(LABEL_KEY, LABEL_VALUE, max_size=3),
    matchExpressions=st.lists(SET_REQUIREMENT, max_size=3),
)
NODE_SELECTOR_TERM = optional(
    matchExpressions=st.lists(NODE_REQUIREMENT, max_size=3),
    matchFields=st.lists(
        st.fixed_dictionaries(
            {
                "key": st.just("metadata.name"),
                "operator": st.sampled_from(["In", "NotIn"]),
                "values": st.lists(DNS_LABEL, min_size=1, max_size=2),
            }
        ),
        max_size=1,
    ),
)
NODE_AFFINITY = optional(
    requiredDuringSchedulingIgnoredDuringExecution=st.fixed_dictionaries(
        {"nodeSelectorTerms": st.lists(NODE_SELECTOR_TERM, max_size=3)}
    ),
    preferredDuringSchedulingIgnoredDuringExecution=st.lists(
        st.fixed_dictionaries({"weight": st.integers(1, 100), "preference": NODE_SELECTOR_TERM}), max_size=2
    ),
)


@st.composite
def tolerations(draw: st.DrawFn) -> dict[str, Any]:
    """A toleration the API server accepts for a pod (ValidateTolerations rules)."""
    tol: dict[str, Any] = {}
    operator = draw(st.sampled_from([None, "Equal", "Exists"]))
    key = draw(st.one_of(st.none(), LABEL_KEY)) if operator == "Exists" else draw(LABEL_KEY)
    if key is not None:
        tol["key"] = key
    if operator is not None:
        tol["operator"] = operator
    if operator != "Exists" and draw(st.booleans()):
        tol["value"] = draw(LABEL_VALUE)
    elif operator == "Exists" and draw(st.booleans()):
        tol["value"] = ""
    effect = draw(st.sampled_from([None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"]))
    if effect is not None:
        tol["effect"] = effect
    if effect == "NoExecute" and draw(st.booleans()):
        tol["tolerationSeconds"] = draw(st.integers(-(2**63), 2**63 - 1))
    return tol


QUOTA_AFFINITY_TERM = st.one_of(
    st.fixed_dictionaries({"quotaNames": unique_list(NAME, min_size=1)}, optional={"labelSelector": LABEL_SELECTOR}),
    st.fixed_dictionaries({"labelSelector": LABEL_SELECTOR}),
)


def meta(namespaced: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {"name": NAME}
    if namespaced:
        fields["namespace"] = DNS_LABEL
    return st.fixed_dictionaries(fields, optional={"labels": st.dictionaries(LABEL_KEY, LABEL_VALUE, max_size=2)})


def resource(
    kind: str,
    spec: st.SearchStrategy[Any],
    status: st.SearchStrategy[Any],
    *,
    namespaced: bool = False,
    spec_required: bool = True,
) -> st.SearchStrategy[dict[str, Any]]:
    base = {"apiVersion": st.just(API_VERSION), "kind": st.just(kind), "metadata": meta(namespaced)}
    optional_ = {"status": status}
    if spec_required:
        base["spec"] = spec
    else:
        optional_["spec"] = spec
    return st.fixed_dictionaries(base, optional=optional_)


# ---- the five kinds ----------------------------------------------------------------------------

QUOTA_SPEC = st.fixed_dictionaries(
    {"queueName": NAME, "request": st.dictionaries(RESOURCE_NAME, QUANTITY, min_size=1, max_size=4)},
    optional={
        "nodeSelector": st.dictionaries(LABEL_KEY, LABEL_VALUE, max_size=3),
        "tolerations": st.lists(tolerations(), max_size=3),
        "affinity": optional(
            nodeAffinity=NODE_AFFINITY,
            quotaAffinity=st.lists(QUOTA_AFFINITY_TERM, max_size=2),
            quotaAntiAffinity=st.lists(QUOTA_AFFINITY_TERM, max_size=2),
            podAffinity=optional(podSelector=LABEL_SELECTOR, namespaces=unique_list(DNS_LABEL)),
        ),
        "sharedQueues": unique_list(NAME),
        "staticBindNode": NAME,
    },
)
TASK = st.fixed_dictionaries(
    {
        "uid": st.uuids().map(str),
        "namespace": DNS_LABEL,
        "name": NAME,
        "job": st.builds("{}/{}".format, DNS_LABEL, NAME),
        "request": RESOURCE_LIST,
        "phase": st.sampled_from(
            ["Pending", "AllocatedToQuota", "Allocated", "Binding", "Bound", "Running", "Succeeded", "Failed"]
        ),
    },
    optional={"taskIndex": NON_NEGATIVE_INT32},
)
RESERVED_TASK = st.fixed_dictionaries(
    {
        "job": st.builds("{}/{}".format, DNS_LABEL, NAME),
        "namespace": DNS_LABEL,
        "podName": NAME,
        "podUID": st.uuids().map(str),
        "reason": st.sampled_from(["Preempted", "Deleted", "Evicted", "Failed"]),
        "expiresAt": TIMESTAMP,
    },
    optional={"taskIndex": NON_NEGATIVE_INT32, "request": RESOURCE_LIST},
)
QUOTA_STATUS = optional(
    phase=st.sampled_from(["QuotaEmpty", "QuotaBound"]),
    nodeName=st.one_of(st.just(""), NAME),
    allocated=RESOURCE_LIST,
    shadowResource=RESOURCE_LIST,
    staticBindStatus=optional(nodeName=NAME, bound=st.booleans()),
    tasks=st.lists(TASK, max_size=3, unique_by=lambda t: t["uid"]),
    reservedTasks=st.lists(RESERVED_TASK, max_size=3, unique_by=lambda t: t["podUID"]),
    reason=TEXT,
    message=TEXT,
    lastTransitionTime=TIMESTAMP,
    observedGeneration=st.integers(0, 2**63 - 1),
)
QUOTAS = resource("Quota", QUOTA_SPEC, QUOTA_STATUS)

MLX5_DEVICE = st.builds("mlx5_{}".format, digits(1, 2))  # mlx5_[0-9]{1,2}
ROCE_NIC = st.fixed_dictionaries(
    {
        "name": st.builds(
            operator.add, st.sampled_from(["en", "ib", "bond"]), st.text(LOWER_DIGITS, min_size=1, max_size=10)
        )
    },
    optional={
        "switchName": TEXT,
        "switchPort": TEXT,
        "rdmaDevice": MLX5_DEVICE,
        "master": st.builds("bond{}".format, st.sampled_from(string.digits)),
    },
)
IB_PORT = st.fixed_dictionaries(
    {"name": MLX5_DEVICE, "port": st.integers(1, 2)},
    optional={
        "guid": st.builds("0x{}".format, st.text("0123456789abcdef", min_size=16, max_size=16)),
        "switchName": TEXT,
        "switchGuid": TEXT,
        "rdmaDevice": MLX5_DEVICE,
    },
)
NODETOPOLOGIES = resource(
    "NodeTopology",
    optional(
        zone=st.builds(
            lambda p, s: p + ",".join(sorted(set(s))),
            st.sampled_from(["roce#", "ib#"]),
            st.lists(DNS_LABEL, min_size=1, max_size=3),
        ),
        net=optional(
            roce=st.lists(ROCE_NIC, max_size=4, unique_by=lambda n: n["name"]),
            ib=st.lists(IB_PORT, max_size=4, unique_by=lambda n: (n["name"], n["port"])),
        ),
    ),
    optional(observedAt=TIMESTAMP, agent=TEXT),
    spec_required=False,
)

CONDITION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["Scheduled", "Unschedulable", "Ready"]),
        "status": st.sampled_from(["True", "False", "Unknown"]),
    },
    optional={
        "reason": st.builds(  # [A-Z][A-Za-z]{0,20}
            operator.add, st.sampled_from(string.ascii_uppercase), st.text(string.ascii_letters, max_size=20)
        ),
        "message": TEXT,
        "lastTransitionTime": TIMESTAMP,
        "transitionID": TEXT,
    },
)
PODGROUPS = resource(
    "PodGroup",
    optional(
        minMember=st.integers(1, 2**31 - 1),
        queue=NAME,
        priorityClassName=NAME,
        minResources=RESOURCE_LIST,
        topology=optional(enabled=st.booleans(), strictOrder=st.booleans(), affinityKey=TEXT),
    ),
    optional(
        phase=st.sampled_from(["Pending", "Inqueue", "Unschedulable", "Running", "Completed", "Unknown"]),
        conditions=st.lists(CONDITION, max_size=3, unique_by=lambda c: c["type"]),
        running=NON_NEGATIVE_INT32,
        succeeded=NON_NEGATIVE_INT32,
        failed=NON_NEGATIVE_INT32,
        boundQuotas=NON_NEGATIVE_INT32,
    ),
    namespaced=True,
    spec_required=False,
)

QUEUES = resource(
    "Queue",
    optional(
        weight=st.integers(1, 2**31 - 1),
        capability=RESOURCE_LIST,
        reclaimable=st.booleans(),
        state=st.sampled_from(["Open", "Closed"]),
    ),
    optional(
        allocated=RESOURCE_LIST,
        specAllocated=st.dictionaries(TEXT, RESOURCE_LIST, max_size=3),
        running=NON_NEGATIVE_INT32,
        pending=NON_NEGATIVE_INT32,
        state=st.sampled_from(["Open", "Closed", "Closing", "Unknown"]),
    ),
    spec_required=False,
)

JOBQUEUES = resource(
    "JobQueue",
    st.fixed_dictionaries(
        {"jobSelector": LABEL_SELECTOR},
        optional={
            "namespaces": unique_list(DNS_LABEL),
            "priority": INT32,
            "state": st.sampled_from(["Open", "Closed"]),
            "maxRunningJobs": NON_NEGATIVE_INT32,
        },
    ),
    optional(runningJobs=NON_NEGATIVE_INT32, pendingJobs=NON_NEGATIVE_INT32, blockedJobs=NON_NEGATIVE_INT32),
)

BY_KIND: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "Quota": QUOTAS,
    "NodeTopology": NODETOPOLOGIES,
    "PodGroup": PODGROUPS,
    "Queue": QUEUES,
    "JobQueue": JOBQUEUES,
}
