"""The experiment spec: refused with field + reason; the runs it expands to."""

from __future__ import annotations

from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.experiment import execute
from manetkit.experiment import spec as S

REPO = Path(__file__).resolve().parents[2]


def base(**over):
    doc = {
        "name": "t",
        "scenarios": ["chain-5"],
        "stacks": ["dsr"],
        "traffics": [{"kind": "bulk", "pairs": [["n1", "n5"]]}],
    }
    doc.update(over)
    return doc


def refused(doc) -> str:
    with pytest.raises(UserError) as exc:
        S.spec_from_dict(doc, "x.yaml")
    return str(exc.value)


def test_the_shipped_specs_load():
    smoke = S.load_spec(REPO / "configs" / "experiments" / "smoke.yaml")
    assert [r.name for r in smoke.runs()] == [
        "chain-3_dsr_none_v0_s1_bulk1",
        "chain-3_dsr_none_v0_s1_http",
    ]
    assert S.throughput_table(smoke)[2] == 683
    mob = S.load_spec(REPO / "configs" / "experiments" / "mobility.yaml")
    runs = mob.runs()
    # the goal table's methodology: 5 seeds x 2 repeats, 100 s windows at medium 60 s
    assert (len(mob.seeds), mob.repeats, mob.duration_s, mob.warmup_s) == (5, 2, 100.0, 60.0)
    assert mob.congestion_control == ["cubic"]
    assert len(runs) == 2 * 3 * 5 * 2 * 3 * 5
    assert len({r.name for r in runs}) == len(runs)


@pytest.mark.parametrize(
    ("over", "field", "reason"),
    [
        ({"stacks": ["dsx"]}, "stacks", "'dsx': Input should be"),
        ({"stacks": ["dsr", "dsr"]}, "stacks", "listed twice"),
        ({"proxies": ["elfn2"]}, "proxies[0]", "Input should be"),
        ({"speeds": [-1]}, "speeds", ">= 0"),
        ({"speeds": [5]}, "speeds", "static mobility"),
        ({"seeds": []}, "seeds", "at least 1"),
        ({"warmup_s": -1}, "warmup_s", "greater than or equal"),
        ({"set": {"stack": "aodv"}}, "set", "matrix axis"),
        ({"scenarios": ["nosuch"]}, "scenarios[0]", "no such scenario"),
        ({"bogus": 1}, "bogus", "Extra inputs"),
        ({"expected": {}}, "expected", "exactly one"),
        ({"expected": {"chain": "missing.json"}}, "expected.chain", "not a bench chain"),
        ({"traffics": []}, "traffics", "at least 1"),
        ({"traffics": [{"kind": "ftp"}]}, "traffics[0]", "kind"),
        ({"traffics": [{"kind": "bulk", "flows": 2, "pairs": [["n1", "n2"]]}]},
         "traffics[0]: pairs", "1 pairs given for flows: 2"),
        ({"traffics": [{"kind": "bulk", "pairs": [["n1", "n9"]]}]}, "traffics[0]", "'n9' is not in"),
        ({"traffics": [{"kind": "bulk", "pairs": [["n1", "n1"]]}]}, "traffics[0]", "same node"),
        ({"traffics": [{"kind": "http", "clients": 4, "servers": 2}]}, "traffics[0]", "needs 6 distinct"),
        ({"traffics": [{"kind": "http", "think_s": [5, 1]}]}, "traffics[0].think_s", "lo <= hi"),
        ({"traffics": [{"kind": "wrk", "client": "n2", "server": "n2"}]}, "traffics[0]", "different"),
        ({"traffics": [{"kind": "bulk"}, {"kind": "bulk"}]}, "traffics", "bulk1 repeats"),
        ({"stacks": ["babeld"], "proxies": ["elfn"]}, "proxies", "no run"),
        ({"traffics": [{"kind": "bulk", "stacks": ["aodv"]}]}, "traffics", "aodv not in"),
        ({"traffics": [{"kind": "bulk", "stacks": []}]}, "traffics[0].stacks", "at least 1"),
        ({"traffics": [{"kind": "bulk", "background": {"flows": 0}}]},
         "traffics[0].background.flows", "greater than or equal to 1"),
        ({"traffics": [{"kind": "bulk", "background": {"packet_bytes": 2000}}]},
         "traffics[0].background.packet_bytes", "less than or equal to 1472"),
        ({"traffics": [{"kind": "bulk", "background": {"flows": 2, "pairs": [["n1", "n2"]]}}]},
         "traffics[0].background: pairs", "1 pairs given for flows: 2"),
        ({"traffics": [{"kind": "bulk", "background": {"flows": 1, "pairs": [["n1", "n7"]]}}]},
         "traffics[0]", "'n7' is not in"),
    ],
)  # fmt: skip
def test_a_bad_spec_is_refused_naming_the_field(over, field, reason):
    msg = refused(base(**over))
    assert msg.startswith("x.yaml: invalid experiment spec")
    line = next((ln for ln in msg.splitlines() if ln.strip().startswith(field)), None)
    assert line is not None, msg
    assert reason in msg, msg


def test_peer_stacks_are_accepted_but_checked_against_the_lab_when_run():
    sp = S.spec_from_dict(base(stacks=["dsr", "babeld", "batmand"]))
    built = S.Scenario.model_fields["stack"].annotation.__args__
    if "babeld" in built and "batmand" in built:
        S.check_stacks_built(sp)  # the peers have landed
    else:
        with pytest.raises(UserError, match=r"^stacks: .*babeld.* not built"):
            S.check_stacks_built(sp)
    S.check_stacks_built(S.spec_from_dict(base()))


def test_a_chain_result_gives_the_table(tmp_path):
    (tmp_path / "chain.json").write_text('{"hops": [1, 2], "throughput_bps": [1400000, 700000]}')
    sp = S.spec_from_dict(base(expected={"chain": "chain.json"}), base_dir=tmp_path)
    assert S.throughput_table(sp) == {1: 1400.0, 2: 700.0}


def test_random_pairs_depend_on_the_seed_only_and_share_nodes_only_when_needed():
    bulk = S.Bulk(kind="bulk", flows=3)
    a = S.bulk_pairs(bulk, 1, 30)
    assert a == S.bulk_pairs(bulk, 1, 30) and a != S.bulk_pairs(bulk, 2, 30)
    assert len({n for p in a for n in p}) == 6
    many = S.bulk_pairs(S.Bulk(kind="bulk", flows=25), 1, 30)
    assert len(set(many)) == 25 and all(x != y for x, y in many)
    http = S.Http(kind="http", clients=10, servers=3)
    pairs = S.http_pairs(http, 1, 50)
    assert len(pairs) == 10 and len({s for _, s in pairs}) == 3
    assert not {c for c, _ in pairs} & {s for _, s in pairs}


def test_run_names_carry_every_parameter():
    r = S.Run("rwp-30", "aodv", "elfn", 2.5, 3, "bulk25")
    assert r.name == "rwp-30_aodv_elfn_v2.5_s3_bulk25"
    assert S.Run("cfg/my.yaml", "dsr", "none", 0, 1, "http").name == "my_dsr_none_v0_s1_http"


def test_a_traffic_can_run_on_some_of_the_stacks_only():
    sp = S.spec_from_dict(base(stacks=["dsr", "aodv", "babeld"], traffics=[
        {"kind": "bulk", "pairs": [["n1", "n5"]]},
        {"kind": "http", "clients": 2, "servers": 1, "stacks": ["dsr", "babeld"]},
    ]))  # fmt: skip
    assert [(r.stack, r.traffic) for r in sp.runs()] == [
        ("dsr", "bulk1"), ("aodv", "bulk1"), ("babeld", "bulk1"),
        ("dsr", "http"), ("babeld", "http"),
    ]  # fmt: skip


def test_the_results_specs_load():
    for p in sorted((REPO / "docs" / "results").glob("*/spec.yaml")):
        sp = S.load_spec(p)
        assert sp.runs(), p
    cmp = S.load_spec(REPO / "docs" / "results" / "mobility-compare" / "spec.yaml")
    assert cmp.set["babeld.profile"] == "mobile" and cmp.set["batmand.profile"] == "mobile"
    assert {r.stack for r in cmp.runs()} == {"dsr", "aodv", "babeld", "batmand"}


def test_runs_go_seed_by_seed_so_a_partial_matrix_has_every_speed():
    sp = S.spec_from_dict(base(scenarios=["rwp-30"], speeds=[10, 20], seeds=[1, 2]))
    assert [(r.seed, r.speed) for r in sp.runs()] == [(1, 10), (1, 20), (2, 10), (2, 20)]


def test_peer_profile_variants_run_beside_the_bare_peers():
    sp = S.spec_from_dict(base(
        scenarios=["rwp-30"], speeds=[10], proxies=["none", "elfn"],
        stacks=["dsr", "babeld", "babeld-mobile", "batmand", "batmand-mobile"],
    ))  # fmt: skip
    runs = sp.runs()
    # peers (variants too) get no elfn run; the names keep the variant
    assert [r.name for r in runs if r.proxy == "none"] == [
        f"rwp-30_{s}_none_v10_s1_bulk1"
        for s in ("dsr", "babeld", "babeld-mobile", "batmand", "batmand-mobile")
    ]
    assert [r.stack for r in runs if r.proxy == "elfn"] == ["dsr"]
    by = {r.stack: execute.overrides_for(sp, r) for r in runs if r.proxy == "none"}
    assert by["babeld-mobile"]["stack"] == "babeld"
    assert by["babeld-mobile"]["babeld.profile"] == "mobile"
    assert "babeld.profile" not in by["babeld"]  # the bare peer: its default profile
    assert by["batmand-mobile"] == {**by["batmand"], "batmand.profile": "mobile"}
    assert S.is_peer("batmand-mobile") and not S.is_peer("dsr")
    assert S.lab_stack("babeld-mobile") == "babeld" and S.lab_stack("aodv") == "aodv"


def test_a_variant_checks_its_lab_stack_and_owns_its_profile():
    built = S.Scenario.model_fields["stack"].annotation.__args__
    if "babeld" in built:
        S.check_stacks_built(S.spec_from_dict(base(stacks=["dsr", "babeld-mobile"])))
    msg = refused(base(stacks=["babeld", "babeld-mobile"], set={"babeld.profile": "mobile"}))
    assert "set: babeld.profile: stack babeld-mobile sets it" in " ".join(msg.split()), msg
    # a profile set for the other peer is fine; a variant with elfn only runs nothing
    S.spec_from_dict(base(stacks=["babeld-mobile"], set={"batmand.profile": "mobile"}))
    assert "no run" in refused(base(stacks=["batmand-mobile"], proxies=["elfn"]))


def test_repeats_run_each_cell_again_and_name_the_repeat():
    sp = S.spec_from_dict(base(scenarios=["rwp-30"], speeds=[10], seeds=[1, 2], repeats=2))
    runs = sp.runs()
    # every seed once before any twice: a partial matrix covers the seeds first
    assert [(r.repeat, r.seed) for r in runs] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    # the first repeat keeps a one-repeat spec's names: raising repeats resumes a matrix
    assert runs[0].name == "rwp-30_dsr_none_v10_s1_bulk1"
    assert runs[3].name == "rwp-30_dsr_none_v10_s2_bulk1_r2"
    assert runs[3].params()["repeat"] == 2
    one = S.spec_from_dict(base(scenarios=["rwp-30"], speeds=[10], seeds=[1, 2])).runs()
    assert [r.name for r in one] == [r.name for r in runs[:2]]


def test_the_congestion_control_is_cubic_unless_said_and_several_make_an_axis():
    sp = S.spec_from_dict(base())
    assert sp.congestion_control == ["cubic"] and sp.runs()[0].cc == "cubic"
    assert S.spec_from_dict(base(congestion_control="reno")).runs()[0].cc == "reno"
    two = S.spec_from_dict(base(congestion_control=["reno", "cubic"])).runs()
    assert [r.name for r in two] == ["chain-5_dsr_none_v0_s1_bulk1_cc-reno",
                                     "chain-5_dsr_none_v0_s1_bulk1_cc-cubic"]  # fmt: skip
    assert two[0].params()["cc_axis"] is True


def test_methodology_defaults_and_the_convergence_cap():
    sp = S.spec_from_dict(base())
    assert (sp.warmup_s, sp.duration_s, sp.repeats) == (60.0, 100.0, 1)
    assert sp.cap_s == 60.0  # the cap defaults to the window's start
    assert S.spec_from_dict(base(warmup_s=30, convergence_cap_s=20)).cap_s == 20.0
    assert (sp.fidelity.lag_p99_ms, sp.fidelity.unmodelled_drops) == (5.0, 0)


@pytest.mark.parametrize(
    ("over", "field", "reason"),
    [({"repeats": 0}, "repeats", "greater than or equal to 1"),
     ({"congestion_control": "Cubic!"}, "congestion_control", "[0]: 'Cubic!' is not a congestion"),
     ({"congestion_control": ["reno", "reno"]}, "congestion_control", "listed twice"),
     ({"warmup_s": 30, "convergence_cap_s": 40}, "convergence_cap_s",
      "40 s is after warmup_s 30 s"),
     ({"fidelity": {"lag_p99_ms": 0}}, "fidelity.lag_p99_ms", "greater than 0")],
)  # fmt: skip
def test_bad_methodology_fields_are_refused_naming_them(over, field, reason):
    msg = refused(base(**over))
    line = next((ln for ln in msg.splitlines() if ln.strip().startswith(field)), None)
    assert line is not None and reason in line, msg


def test_every_peer_profile_is_a_stack_variant_and_the_bare_peer_is_the_operators():
    assert set(S.STACK_VARIANTS) == {
        "babeld-fast", "babeld-wireless-nolq", "babeld-default", "babeld-mobile",
        "batmand-default", "batmand-mobile",
    }  # fmt: skip
    assert S.STACK_VARIANTS["babeld-fast"] == ("babeld", {"babeld.profile": "fast"})
    sp = S.spec_from_dict(base(stacks=["babeld", "babeld-default"]))
    by = {r.stack: execute.overrides_for(sp, r) for r in sp.runs()}
    assert "babeld.profile" not in by["babeld"]  # the scenario's default: wireless
    assert by["babeld-default"]["babeld.profile"] == "default"


def test_a_kernel_without_the_algorithm_is_refused_naming_it():
    from manetkit.lab import tcpcc

    loaded: list[str] = []
    have = {"reno", "cubic"}
    tcpcc.require(["cubic", "reno"], have=lambda: have, load=loaded.append)
    assert loaded == []  # nothing to load
    with pytest.raises(UserError, match=r"congestion_control: vegas not in this kernel"):
        tcpcc.require(["cubic", "vegas"], have=lambda: have, load=loaded.append)
    assert loaded == ["vegas"]  # its module was tried first
    tcpcc.require(["bbr"], have=lambda: have, load=lambda n: have.add(n))  # loaded: fine


def test_the_hosts_allowed_list_is_widened_for_the_matrix_and_put_back(tmp_path):
    from manetkit.lab import tcpcc

    allowed = tmp_path / "tcp_allowed_congestion_control"
    allowed.write_text("reno bbr\n")  # a host whose default is BBR: cubic is restricted
    state = tmp_path / "state"
    with tcpcc.allowing(["cubic", "reno"], allowed, state) as added:
        assert added == ["cubic"] and allowed.read_text() == "reno bbr cubic\n"
    assert allowed.read_text() == "reno bbr\n"
    with pytest.raises(RuntimeError), tcpcc.allowing(["vegas"], allowed, state):
        raise RuntimeError("a run broke")
    assert allowed.read_text() == "reno bbr\n"  # put back on the way out too
    with tcpcc.allowing(["reno"], allowed, state) as added:
        assert added == [] and allowed.read_text() == "reno bbr\n"  # nothing to touch
    assert sorted(p.name for p in state.iterdir()) == ["lock"]  # no holder left behind


def test_overlapping_matrices_keep_what_the_other_still_needs(tmp_path):
    """The first matrix to end must not take cubic away from one still running (its
    runs failed with EPERM when each put back the list it had found)."""
    from manetkit.lab import tcpcc

    allowed = tmp_path / "tcp_allowed_congestion_control"
    allowed.write_text("reno bbr\n")
    state = tmp_path / "state"
    first = tcpcc.allowing(["cubic"], allowed, state)
    first.__enter__()
    with tcpcc.allowing(["cubic", "vegas"], allowed, state) as added:
        assert added == ["vegas"]  # cubic was already there, added by the first
        first.__exit__(None, None, None)  # the first matrix ends while this one runs
        assert allowed.read_text() == "reno bbr cubic vegas\n"
    assert allowed.read_text() == "reno bbr\n"  # the host's own list, after the last


def test_a_killed_matrixs_widening_is_undone_by_the_next(tmp_path):
    """A matrix killed with -9 leaves its holder file (no longer locked: its process is
    gone) and the widened list; the next one drops the dead holder and puts the host's
    list back when it ends."""
    from manetkit.lab import tcpcc

    allowed = tmp_path / "tcp_allowed_congestion_control"
    state = tmp_path / "state"
    state.mkdir()
    (state / "original").write_text("reno bbr\n")
    (state / "holder-999999-deadbeef").write_text("cubic\n")
    allowed.write_text("reno bbr cubic\n")
    with tcpcc.allowing(["reno"], allowed, state):
        assert allowed.read_text() == "reno bbr\n"  # the dead holder no longer counts
    assert allowed.read_text() == "reno bbr\n"
    assert sorted(p.name for p in state.iterdir()) == ["lock"]
