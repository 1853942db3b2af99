"""How ``FitsOnlyAboveAllowedTier`` reads (``extender/plugins/topology/refusals.py``): the verb
agrees with the gang's words (``4 quotas fit``, ``1×8 GPU fits``), and a gang held hard to one
NVLink domain whose bound sibling sits on a node naming none is told that node, not the room of
a domain ``-`` (before: ``its siblings' NVLink domain, -, takes 0 of 1``).
"""

from __future__ import annotations

from hypothesis import given

from extender.framework.status import Reason
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.plugins.topology.refusals import GangWords, describe_gang, fits_only_above
from extender.wellknown import RESOURCE_GPU as GPU
from tests.core.props import PROPERTY
from tests.core.test_nvlink_domains_property import partly_bound, run_within_nvlink
from tests.core.topo_cluster import NodeSpec
from tests.core.topo_gangs import Cluster, Gang


def _words(*gpus: int) -> GangWords:
    """The words of a gang of quotas of these GPUs."""
    return describe_gang([QuotaInfo(f"q{i}", "research", Resource({GPU: g * 1000})) for i, g in enumerate(gpus)])


def test_the_verb_agrees_with_the_gangs_words() -> None:
    """A gang of one size is one measure (``3×8 GPU fits``); quotas of several sizes are counted
    (``2 quotas fit``; one, were it ever so worded, ``1 quota fits``)."""
    assert (str(_words(8, 8, 8)), _words(8, 8, 8).fits()) == ("3×8 GPU", "3×8 GPU fits")
    assert (str(_words(1, 8)), _words(1, 8).fits()) == ("2 quotas", "2 quotas fit")
    assert GangWords("1 quota").fits() == "1 quota fits"
    status = fits_only_above(_words(1, 8, 8), 3, span=1, levels=1, limit=0, room={"1a": 2})
    assert status.message() == (
        "FitsOnlyAboveAllowedTier(3 quotas fit only across a leaf (tier 1); highestTierAllowed is nvlink "
        "(tier 0), and the roomiest NVLink domain, 1a, takes 2 of 3)"
    )


def test_a_gang_whose_sibling_sits_on_a_node_without_an_nvlink_domain_is_told_that_node() -> None:
    """Rank 0 bound on n0, which names no NVLink domain; n1, n2 (domain a) are empty. Held hard to
    one domain, rank 1 can never join it: the refusal says n0 has no NVLink domain."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain="" if i == 0 else "1a") for i in range(3)]
    c = Cluster(nodes, [Gang("g0", 2, 8, False, bound={0: "n0"})])
    (status,) = (v.status for v in run_within_nvlink(c, pack=False).verdicts.values())
    assert status.message() == (
        "FitsOnlyAboveAllowedTier(1×8 GPU fits only across a leaf (tier 1); highestTierAllowed is nvlink "
        "(tier 0), and its siblings' node n0 has no NVLink domain)"
    )


@PROPERTY
@given(partly_bound())
def test_a_bound_gang_over_its_nvlink_limit_names_its_siblings_nodes_without_a_domain(c: Cluster) -> None:
    """Whenever such a gang waits with ``FitsOnlyAboveAllowedTier`` and some bound sibling's node
    names no NVLink domain, the refusal names exactly those nodes, and never a unit ``-``."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    homeless = sorted({n for n in g.bound.values() if not spec[n].domain})
    result = run_within_nvlink(c, pack=False)
    for verdict in result.verdicts.values():
        message = verdict.status.message()
        if verdict.status.reason is not Reason.FITS_ONLY_ABOVE_ALLOWED_TIER:
            continue
        assert ", -, " not in message, message
        if homeless:
            has = f"node {homeless[0]} has" if len(homeless) == 1 else f"nodes {', '.join(homeless)} have"
            assert message.endswith(f"its siblings' {has} no NVLink domain)"), message


def test_a_gang_whose_siblings_span_several_units_is_told_those_units() -> None:
    """Bound siblings in two leaves of a gang held hard to one leaf (or two NVLink domains, to
    one domain): the refusal names the units they span, in the plural, and no unit's room."""
    leaf = fits_only_above(
        _words(8), 1, span=2, levels=2, limit=1, room={"s1": 3, "s0": 1}, siblings=True, spanned=["s0", "s1"]
    )
    assert leaf.message() == (
        "FitsOnlyAboveAllowedTier(1×8 GPU fits only across a spine (tier 2); highestTierAllowed is leaf "
        "(tier 1), and its bound siblings already span 2 leaves (s0, s1): no leaf can hold it with them)"
    )
    nvlink = fits_only_above(
        _words(8), 1, span=1, levels=1, limit=0, room={"1a": 2}, siblings=True, spanned=["1a", "1b"]
    )
    assert "span 2 NVLink domains (1a, 1b): no NVLink domain can hold it" in nvlink.message()
    assert "takes" not in nvlink.message()
