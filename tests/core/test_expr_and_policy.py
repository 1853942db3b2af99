"""The stage expression language, the typed policy file and the plugin/action registries (DESIGN §5).

Errors must point at the bad token: the tests assert the caret column of the message.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

import extender.actions
import extender.plugins
from extender.actions import ACTIONS
from extender.conf import default_policy, default_policy_text, load_policy_file, load_policy_text
from extender.framework.expr import ALL_OPERATORS, Call, ExprError, Kind, Ref, check, compile_expr, parse, plugins_of
from extender.framework.policy import PolicyError
from extender.framework.session import EventKind
from extender.framework.stages import STAGES
from extender.framework.status import SKIP, SUCCESS, Code, Reason, Status
from extender.plugins import PLUGINS

ROOT = Path(__file__).resolve().parents[2]

# --- parsing ------------------------------------------------------------------------------------------


def test_parse_builds_the_tree_with_positions() -> None:
    node = parse("sum(topology, 2*binpack, min(nodeorder, 0.5*sylas))")
    assert node == Call(
        "sum",
        (
            Ref("topology", 1.0, 4),
            Ref("binpack", 2.0, 14),
            Call("min", (Ref("nodeorder", 1.0, 29), Ref("sylas", 0.5, 40)), 25),
        ),
        0,
    )
    assert plugins_of(node) == ["topology", "binpack", "nodeorder", "sylas"]


@pytest.mark.parametrize("op", sorted(ALL_OPERATORS))
def test_every_operator_parses(op: str) -> None:
    node = parse(f"{op}(a, b)")
    assert isinstance(node, Call)
    assert node.op == op
    assert [r.plugin for r in node.args if isinstance(r, Ref)] == ["a", "b"]


def test_a_lone_plugin_is_an_expression() -> None:
    assert parse("  gang ") == Ref("gang", 1.0, 2)


def test_the_seven_operators_are_the_documented_ones() -> None:
    assert {"and", "or", "joint", "sum", "intersect", "min", "first_not_pass"} == ALL_OPERATORS


def caret(err: ExprError | PolicyError) -> tuple[str, int]:
    """(echoed expression, caret column within it) from the last two lines of an error message."""
    lines = str(err).splitlines()
    text_line, caret_line = lines[-2], lines[-1]
    assert text_line.startswith("  ")
    assert caret_line.strip() == "^"
    return text_line[2:], caret_line.index("^") - 2


PARSE_ERRORS = [
    # (text, caret column, words the message must contain)
    ("joint(predicates, fancy(storage))", 18, "unknown operator 'fancy'"),
    ("sum(topology, binpack) nodeorder", 23, "unexpected 'nodeorder'"),
    ("sum(topology, binpack))", 22, "unexpected ')'"),
    ("", 0, "empty expression"),
    ("joint(predicates", 16, "expected ',' or ')'"),
    ("joint(predicates storage)", 17, "found 'storage'"),
    ("joint(predicates; storage)", 16, "unexpected character ';'"),
    ("joint()", 6, "found ')'"),
    ("joint(predicates,)", 17, "found ')'"),
    ("and", 0, "needs arguments"),
    ("2*joint(a)", 2, "a weight applies to a plugin"),
    ("sum(2*)", 6, "expected a plugin name"),
    ("sum(2*3)", 6, "expected a plugin name"),
    ("sum(2 binpack)", 6, "expected '*'"),
]


@pytest.mark.parametrize(("text", "col", "words"), PARSE_ERRORS, ids=[t or "<empty>" for t, _, _ in PARSE_ERRORS])
def test_parse_errors_point_at_the_bad_token(text: str, col: int, words: str) -> None:
    with pytest.raises(ExprError) as err:
        parse(text)
    assert err.value.pos == col
    assert words in str(err.value)
    echoed, at = caret(err.value)
    assert echoed == text
    assert at == col


# --- checking ------------------------------------------------------------------------------------------

AVAILABLE = {"predicates": True, "storage": True, "quotapredicates": True, "binpack": False}

CHECK_ERRORS = [
    ("joint(predicates, nosuch)", Kind.STATUS, 18, "plugin 'nosuch' is not enabled"),
    ("joint(predicates, binpack)", Kind.STATUS, 18, "plugin 'binpack' does not implement this stage"),
    ("joint(2*predicates, storage)", Kind.STATUS, 6, "weights are only allowed in score stages"),
    ("joint(predicates, sum(storage))", Kind.STATUS, 18, "operator 'sum' cannot combine status results"),
    ("intersect(predicates, storage)", Kind.STATUS, 0, "operator 'intersect' cannot combine status"),
    ("and(storage, predicates)", Kind.SCORE, 0, "operator 'and' cannot combine score results"),
    ("sum(storage)", Kind.SET, 0, "operator 'sum' cannot combine set results"),
    ("joint(storage)", Kind.ORDER, 0, "operator 'joint' cannot combine order results"),
]


@pytest.mark.parametrize(("text", "kind", "col", "words"), CHECK_ERRORS, ids=[t for t, *_ in CHECK_ERRORS])
def test_check_errors_point_at_the_bad_token(text: str, kind: Kind, col: int, words: str) -> None:
    with pytest.raises(ExprError) as err:
        check(text, parse(text), kind, AVAILABLE)
    assert words in str(err.value)
    assert caret(err.value) == (text, col)


@pytest.mark.parametrize(
    ("text", "col"),
    [("joint(predicates, storage, predicates)", 27), ("joint(storage, and(predicates, storage))", 31)],
)
def test_duplicate_plugin_caret_points_at_the_second_occurrence(text: str, col: int) -> None:
    with pytest.raises(ExprError, match="appears twice") as err:
        check(text, parse(text), Kind.STATUS, AVAILABLE)
    assert caret(err.value) == (text, col)


def test_duplicate_plugin_is_an_error() -> None:
    for text in ("joint(predicates, storage, predicates)", "joint(storage, and(predicates, storage))"):
        with pytest.raises(ExprError, match=r"plugin '(predicates|storage)' appears twice"):
            check(text, parse(text), Kind.STATUS, AVAILABLE)


def test_a_weight_of_one_outside_score_stages_is_an_error() -> None:
    text = "joint(1*predicates, storage)"
    with pytest.raises(ExprError, match="weights are only allowed in score stages"):
        check(text, parse(text), Kind.STATUS, AVAILABLE)


@pytest.mark.parametrize(
    ("kind", "ops"),
    [
        (Kind.STATUS, {"and", "joint", "or", "first_not_pass"}),
        (Kind.SCORE, {"sum", "min"}),
        (Kind.SCORES, {"sum", "min"}),
        (Kind.CHOICE, {"or", "first_not_pass"}),
        (Kind.SET, {"intersect", "or"}),
        (Kind.ORDER, {"first_not_pass"}),
    ],
)
def test_which_operators_each_kind_accepts(kind: Kind, ops: set[str]) -> None:
    for op in ALL_OPERATORS:
        text = f"{op}(predicates, storage)"
        if op in ops:
            check(text, parse(text), kind, AVAILABLE)
        else:
            with pytest.raises(ExprError, match=f"operator '{op}' cannot combine"):
                check(text, parse(text), kind, AVAILABLE)


# --- semantics on stub plugins ---------------------------------------------------------------------


def bind(text: str, kind: Kind, fns: Mapping[str, Callable[..., Any]]) -> Callable[..., Any]:
    node = parse(text)
    check(text, node, kind, dict.fromkeys(fns, True))
    return compile_expr(node, kind)(fns)


def fail(reason: Reason, detail: str = "", code: Code = Code.UNSCHEDULABLE) -> Status:
    return Status(code, (Status.unschedulable(reason, detail).failures[0],))


class Calls:
    """Stub plugins that record the order in which they are called."""

    def __init__(self, **results: Any) -> None:
        self.log: list[str] = []
        self.results = results

    def fns(self) -> dict[str, Callable[..., Any]]:
        def make(name: str) -> Callable[..., Any]:
            def fn(*args: Any) -> Any:
                self.log.append(name)
                return self.results[name]

            return fn

        return {name: make(name) for name in self.results}


NOT_READY = fail(Reason.NODE_NOT_READY, "n1", Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
NO_IDLE = fail(Reason.INSUFFICIENT_QUOTA_IDLE, "nvidia.com/gpu 8 > 7")


def test_and_short_circuits_at_the_first_failure_and_names_its_plugin() -> None:
    c = Calls(a=SUCCESS, b=SKIP, x=NO_IDLE, y=NOT_READY)
    out = bind("and(a, b, x, y)", Kind.STATUS, c.fns())("quota", "node")
    assert c.log == ["a", "b", "x"]  # y never runs
    assert out.code is Code.UNSCHEDULABLE
    assert [(f.reason, f.plugin) for f in out.failures] == [(Reason.INSUFFICIENT_QUOTA_IDLE, "x")]
    assert bind("and(a, b)", Kind.STATUS, Calls(a=SUCCESS, b=SKIP).fns())().ok


def test_joint_runs_everyone_and_keeps_every_failure() -> None:
    c = Calls(a=NO_IDLE, b=SUCCESS, y=NOT_READY)
    out = bind("joint(a, b, y)", Kind.STATUS, c.fns())()
    assert c.log == ["a", "b", "y"]
    assert out.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # the worst code wins
    assert [(f.reason, f.plugin) for f in out.failures] == [
        (Reason.INSUFFICIENT_QUOTA_IDLE, "a"),
        (Reason.NODE_NOT_READY, "y"),
    ]
    assert out.message() == "InsufficientQuotaIdle(nvidia.com/gpu 8 > 7); NodeNotReady(n1)"
    single = bind("joint(a, b)", Kind.STATUS, Calls(a=NO_IDLE, b=SKIP).fns())()
    assert single.failures == (NO_IDLE.with_plugin("a").failures[0],)
    assert bind("joint(a, b)", Kind.STATUS, Calls(a=SKIP, b=SUCCESS).fns())() == SUCCESS


@pytest.mark.parametrize(
    ("results", "ok", "reasons"),
    [
        ({"a": NO_IDLE, "b": SUCCESS}, True, []),
        ({"a": SKIP, "b": SKIP}, True, []),  # everyone abstains: pass
        ({"a": SKIP, "b": NO_IDLE}, False, [Reason.INSUFFICIENT_QUOTA_IDLE]),  # abstaining is not passing
        ({"a": NO_IDLE, "b": NOT_READY}, False, [Reason.INSUFFICIENT_QUOTA_IDLE, Reason.NODE_NOT_READY]),
    ],
)
def test_or_passes_when_anyone_passes(results: dict[str, Status], ok: bool, reasons: list[Reason]) -> None:
    out = bind("or(a, b)", Kind.STATUS, Calls(**results).fns())()
    assert out.ok is ok
    assert [f.reason for f in out.failures] == reasons


def test_first_not_pass_lets_the_first_non_abstaining_plugin_decide() -> None:
    c = Calls(a=SKIP, b=SUCCESS, x=NO_IDLE)
    assert bind("first_not_pass(a, b, x)", Kind.STATUS, c.fns())() == SUCCESS
    assert c.log == ["a", "b"]
    out = bind("first_not_pass(a, x, b)", Kind.STATUS, Calls(a=SKIP, x=NO_IDLE, b=SUCCESS).fns())()
    assert out.reason is Reason.INSUFFICIENT_QUOTA_IDLE
    assert bind("first_not_pass(a)", Kind.STATUS, Calls(a=SKIP).fns())().ok


def test_a_single_status_plugin_gets_its_name_on_failures() -> None:
    out = bind("x", Kind.STATUS, Calls(x=NO_IDLE).fns())()
    assert out.failures[0].plugin == "x"


def test_sum_and_min_of_weighted_scores() -> None:
    fns = Calls(a=0.5, b=2.0, c=1.0).fns()
    assert bind("sum(a, 2*b, 0.5*c)", Kind.SCORE, fns)() == pytest.approx(0.5 + 4.0 + 0.5)
    assert bind("min(a, 2*b)", Kind.SCORE, fns)() == pytest.approx(0.5)
    assert bind("sum(3*a, min(b, c))", Kind.SCORE, fns)() == pytest.approx(2.5)
    assert bind("3*a", Kind.SCORE, fns)() == pytest.approx(1.5)


def test_per_target_score_maps_merge_with_missing_targets_as_zero() -> None:
    fns = Calls(a={"n0": 1.0, "n1": 2.0}, b={"n1": 3.0, "n2": 4.0}).fns()
    assert bind("sum(a, 2*b)", Kind.SCORES, fns)() == {"n0": 1.0, "n1": 8.0, "n2": 8.0}
    assert bind("min(a, b)", Kind.SCORES, fns)() == {"n0": 0.0, "n1": 2.0, "n2": 0.0}


def test_choices_take_the_first_answer() -> None:
    c = Calls(a=None, b="n3", x="n7")
    assert bind("or(a, b, x)", Kind.CHOICE, c.fns())() == "n3"
    assert c.log == ["a", "b"]
    assert bind("first_not_pass(x, b)", Kind.CHOICE, Calls(x="n7", b="n3").fns())() == "n7"
    assert bind("or(a)", Kind.CHOICE, Calls(a=None).fns())() is None


def test_intersect_keeps_the_order_of_the_first_answer_and_skips_abstainers() -> None:
    fns = Calls(a=None, b=("n3", "n1", "n2"), c=frozenset({"n2", "n3", "n9"})).fns()
    assert bind("intersect(a, b, c)", Kind.SET, fns)() == ("n3", "n2")
    assert bind("intersect(a)", Kind.SET, Calls(a=None).fns())() is None
    assert bind("intersect(b, x)", Kind.SET, Calls(b=("n1",), x=()).fns())() == ()


def test_or_of_sets_is_an_ordered_union() -> None:
    fns = Calls(a=("n2", "n1"), b=None, c=("n1", "n3")).fns()
    assert bind("or(a, b, c)", Kind.SET, fns)() == ("n2", "n1", "n3")


def test_order_keys_compare_lexicographically() -> None:
    key = bind("first_not_pass(a, b)", Kind.ORDER, {"a": lambda j: (-j["prio"],), "b": lambda j: (j["share"],)})
    jobs = [{"prio": 1, "share": 0.1}, {"prio": 5, "share": 0.9}, {"prio": 5, "share": 0.2}]
    assert sorted(jobs, key=key) == [jobs[2], jobs[1], jobs[0]]


# --- the policy file -----------------------------------------------------------------------------------


MINIMAL = "actions: [allocate_job]\nplugins: {gang: {}, backoff: {}, priority: {}}\n"

POLICY_ERRORS = [
    ("actions: [allocate_job]\nbogus: 1\n", ["unknown key(s) bogus"]),
    ("actions: [allocate_job, allocate_jobz]\n", ["actions[1]", "unknown action 'allocate_jobz'"]),
    ("actions: [allocate_job, allocate_job]\n", ["actions[1]", "'allocate_job' is listed twice"]),
    ("actions: []\n", ["'actions' must be a non-empty list"]),
    ("plugins: {gang: {}}\n", ["'actions' must be a non-empty list"]),
    ("actions: [allocate_job]\nplugins: {gangz: {}}\n", ["unknown plugin 'gangz'"]),
    ("actions: [allocate_job]\nplugins: {gang: {}}\nstages: {qn.sort: gang}\n", ["unknown stage 'qn.sort'"]),
    (
        "actions: [allocate_job]\nplugins: {gang: {}}\nstages: {job.valid: 3}\n",
        ["stages.job.valid", "must be a string"],
    ),
    (
        "actions: [allocate_job]\nplugins: {storage: {heartbeat_tolerance_seconds: soon}}\n",
        ["plugin storage", "heartbeat_tolerance_seconds", "valid number"],
    ),
    ("actions: [allocate_job]\nplugins: {storage: {heartbeat_tolerance_seconds: -1}}\n", ["plugin storage", "greater"]),
    ("actions: [allocate_job]\nplugins: {gang: {min: 2}}\n", ["plugin gang", "min", "Extra inputs"]),
    ("actions: [allocate_job]\nplugins: {gang: 3}\n", ["plugins.gang", "must be a map"]),
    ("actions: [{release_quota: {unschedulable_cycles: 0}}]\n", ["action release_quota", "unschedulable_cycles"]),
    ("actions: [{release_quota: {cycles: 3}}]\n", ["action release_quota", "cycles", "Extra inputs"]),
    ("actions: [{allocate_job: {}, release_quota: {}}]\n", ["actions[0]", "one-key map"]),
    ("actions: [allocate_job]\nplugins: [gang]\n", ["'plugins' must be a map"]),
    ("- allocate_job\n", ["must be a map"]),
    ("actions: [allocate_job\n", ["not valid YAML"]),
    (
        "actions: [allocate_job]\nplugins: {gang: {}, backoff: {}}\nstages: {job.valid: 'and(gang, drf)'}\n",
        ["stages.job.valid", "plugin 'drf' is not enabled"],
    ),
    (
        "actions: [allocate_job]\nplugins: {gang: {}, priority: {}}\nstages: {job.valid: 'and(gang, priority)'}\n",
        ["stages.job.valid", "plugin 'priority' does not implement this stage"],
    ),
    (
        "actions: [allocate_job]\nplugins: {binpack: {}}\nstages: {qn.node_order: 'avg(binpack)'}\n",
        ["stages.qn.node_order", "unknown operator 'avg'"],
    ),
]


@pytest.mark.parametrize(("text", "words"), POLICY_ERRORS, ids=[str(i) for i in range(len(POLICY_ERRORS))])
def test_policy_load_errors_name_the_culprit(text: str, words: list[str]) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy_text(text, "my-policy.yaml")
    msg = str(err.value)
    assert msg.startswith("my-policy.yaml")
    for w in words:
        assert w in msg


def test_a_stage_expression_error_carries_the_caret() -> None:
    text = "actions: [allocate_job]\nplugins: {gang: {}, backoff: {}}\nstages: {job.valid: 'and(gang, nope)'}\n"
    with pytest.raises(PolicyError) as err:
        load_policy_text(text)
    assert caret(err.value) == ("and(gang, nope)", 10)


def test_the_default_policy_loads_with_typed_arguments() -> None:
    p = default_policy()
    assert p.action_names == (
        "fix_quota_binding",
        "allocate_job",
        "release_idle_quota",
        "allocate_zone",
        "allocate_quota",
        "release_quota",
    )
    doc = yaml.safe_load(default_policy_text())
    assert set(p.plugins) == set(doc["plugins"])
    storage = p.plugins["storage"]
    assert storage.args.heartbeat_tolerance_seconds == 90.0  # type: ignore[attr-defined]
    assert p.stages["qn.node_order"].participants == ("topology", "binpack", "nodeorder", "sylas")
    assert p.stages["job.quota_allocate"].expression == "and(gang, topology)"
    assert set(p.stages) == set(STAGES)
    for stage in p.stages.values():  # every stage compiles to something runnable or to "nobody takes part"
        assert (stage.binder is None) == (not stage.participants)


def test_stages_without_an_expression_combine_every_implementer_by_the_default_operator() -> None:
    p = load_policy_text(MINIMAL)
    valid = p.stages["job.valid"]
    assert set(valid.participants) == {"gang", "backoff"}
    assert valid.expression.startswith("joint(")
    order = p.stages["job.order"]
    assert order.participants == ("priority",)
    assert order.expression == "priority"
    assert p.stages["qn.predicate"].binder is None  # no enabled plugin implements it


def test_examples_policy_loads_if_present() -> None:
    path = ROOT / "examples" / "policy.yaml"
    if not path.exists():
        pytest.skip("examples/policy.yaml does not exist yet")
    policy = load_policy_file(path)
    assert policy.action_names


def test_a_missing_policy_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy_file(tmp_path / "nope.yaml")


# --- registries --------------------------------------------------------------------------------------


def _module_of(cls: Any) -> str:
    return str(cls.__module__)


@pytest.mark.parametrize(("name", "cls"), sorted(PLUGINS.items()))
def test_plugin_registry_key_is_the_module_basename(name: str, cls: Any) -> None:
    assert _module_of(cls) == f"extender.plugins.{name}"
    pkg = Path(extender.plugins.__file__).parent
    assert (pkg / f"{name}.py").is_file() or (pkg / name / "__init__.py").is_file()
    assert name == cls.NAME
    assert set(STAGES) | {"events"} >= cls.STAGES
    kinds = getattr(cls, "EVENT_KINDS", None)  # optional: the statement events its handler follows
    if kinds is not None:
        assert "events" in cls.STAGES
        assert kinds and kinds <= set(EventKind)


@pytest.mark.parametrize(("name", "cls"), sorted(ACTIONS.items()))
def test_action_registry_key_is_the_module_basename(name: str, cls: Any) -> None:
    assert _module_of(cls) == f"extender.actions.{name}"
    assert (Path(extender.actions.__file__).parent / f"{name}.py").is_file()
    assert name == cls.NAME


def _modules_defining(package: Any, attr: str) -> set[str]:
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        mod = importlib.import_module(f"{package.__name__}.{info.name}")
        if isinstance(getattr(mod, attr, None), type) and getattr(mod, attr).__module__ == mod.__name__:
            found.add(info.name)
    return found


def test_every_plugin_module_is_registered() -> None:
    assert _modules_defining(extender.plugins, "Plugin") == set(PLUGINS)


def test_every_action_module_is_registered() -> None:
    assert _modules_defining(extender.actions, "Action") == set(ACTIONS)


def test_design_plugins_are_all_registered() -> None:
    """DESIGN §5 lists the plugins (sylas is the spot plugin)."""
    design = {
        "priority",
        "gang",
        "drf",
        "conformance",
        "predicates",
        "nodeorder",
        "binpack",
        "backoff",
        "quotapredicates",
        "quotaaffinity",
        "topology",
        "sylas",
        "storage",
        "specpool",
        "jobqueue",
    }
    assert design <= set(PLUGINS)
