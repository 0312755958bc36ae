"""The ns-3 oracle (``manetkit.bench.oracle``): its committed golden curves, the pure curve
arithmetic and the build's error without ns-3. Nothing here needs ns-3 installed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from manetkit import cli
from manetkit.bench.oracle import build, curves, params

GOLDEN = Path(__file__).parent / "data" / "ns3"


@pytest.fixture(scope="module")
def delivery() -> dict:
    return json.loads((GOLDEN / "delivery.json").read_text())


@pytest.fixture(scope="module")
def chain() -> dict:
    return json.loads((GOLDEN / "chain.json").read_text())


def test_the_golden_curves_cover_the_whole_validation_grid(delivery):
    got = {curves.curve_key(c) for c in delivery["curves"]}
    want = {
        (s.profile, s.standard, s.rate_mbps, s.frame_bytes, "nakagami" if s.fading else "none")
        for s in params.validation_grid()
    }
    assert got == want
    assert len(delivery["curves"]) == len(want)  # no curve twice
    assert delivery["source"].startswith("ns-3 3.37")


def test_every_golden_curve_is_well_formed(delivery):
    # 2 pp sampling error at 50 % delivery needs 625 frames per point
    assert delivery["frames_per_point"] >= 625
    for c in delivery["curves"]:
        name = curves.curve_key(c)
        pts = c["points"]
        assert [p["distance_m"] for p in pts] == [10.0 * (i + 1) for i in range(len(pts))], name
        for p in pts:
            assert p["sent"] == delivery["frames_per_point"], name
            assert 0 <= p["received"] <= p["sent"], name
            assert p["delivery"] == pytest.approx(p["received"] / p["sent"], abs=1e-4), name
        # the grid runs to where delivery is 0, and not beyond
        assert pts[-1]["received"] == 0 and pts[-2]["received"] > 0, name
        assert pts[0]["delivery"] > 0.9, name
        assert c["psdu_bytes"] == params.psdu_bytes(c["frame_bytes"]), name
        assert c["d50_m"] == pytest.approx(curves.distance_at(pts), abs=0.01), name


def test_the_golden_curves_were_made_with_todays_parameters(delivery):
    for c in delivery["curves"]:
        profile = params.PROFILES[c["profile"]]
        assert c["params"] == profile.as_params(c["standard"], c["fading"] == "nakagami")


def test_ns3_reproduces_the_gray_zone(delivery):
    """Outdoor 802.11b: 60-byte frames at 1 Mbit/s reach 50 % delivery at least twice as
    far as 1000-byte frames at 11 Mbit/s."""
    assert curves.gray_zone_ratio(delivery, "nakagami") >= 2.0
    # without fading the ratio sits at the edge (the 1 Mbit/s curve is the -97 dBm gate)
    assert curves.gray_zone_ratio(delivery, "none") >= 1.9


def test_faster_rates_reach_less_far(delivery):
    idx = curves.index(delivery)
    for (profile, standard, rate, frame, fading), c in idx.items():
        slower = [
            other
            for (p, s, r, f, fd), other in idx.items()
            if (p, s, f, fd) == (profile, standard, frame, fading) and r < rate
        ]
        for other in slower:
            assert other["d50_m"] >= c["d50_m"], (profile, standard, rate, frame, fading)


def test_the_golden_chain_table(chain):
    for fading in ("none", "nakagami"):
        table = chain[fading]
        rows = table["rows"]
        assert [r["hops"] for r in rows] == list(params.CHAIN_HOPS)
        assert rows[0]["ratio_to_1hop"] == 1.0
        assert table["hop_length_m"] == params.CHAIN_HOP_M
        # spatial reuse: throughput falls with the hop count, fast at first
        assert rows[1]["ratio_to_1hop"] < 0.6 and rows[2]["ratio_to_1hop"] < 0.45
        for r in rows:
            assert r["ratio_to_1hop"] == pytest.approx(
                r["throughput_mbps"] / rows[0]["throughput_mbps"], abs=1e-3
            )


def test_distance_at_interpolates_between_the_points_around_the_crossing():
    pts = [{"distance_m": d, "delivery": r} for d, r in [(10, 1.0), (20, 0.9), (30, 0.3), (40, 0)]]
    assert curves.distance_at(pts) == pytest.approx(20 + 10 * (0.9 - 0.5) / (0.9 - 0.3))
    assert curves.distance_at(pts, 0.95) == pytest.approx(15.0)
    assert curves.distance_at(pts[:2]) is None
    assert curves.distance_at([{"distance_m": 10, "delivery": 0.2}]) == 10


def test_trim_keeps_the_first_point_after_the_last_delivery():
    pts = [{"received": n} for n in (5, 0, 3, 0, 0, 0)]
    assert curves.trim(pts) == pts[:4]
    assert curves.trim([{"received": 0}, {"received": 0}]) == [{"received": 0}]


def test_mean_abs_difference_counts_missing_distances_as_zero_delivery():
    a = [{"distance_m": 10, "delivery": 1.0}, {"distance_m": 20, "delivery": 0.5}]
    b = [{"distance_m": 10, "delivery": 0.9}]
    assert curves.mean_abs_difference(a, b) == pytest.approx((0.1 + 0.5) / 2)


def test_profile_arithmetic_matches_the_documented_figures():
    assert params.friis_loss_db(2412) == pytest.approx(40.095, abs=1e-3)
    assert params.noise_dbm("802.11b", 7) == pytest.approx(-93.55, abs=0.01)
    assert params.noise_dbm("802.11g", 7) == pytest.approx(-93.97, abs=0.01)
    outdoor = params.PROFILES["outdoor"]
    # the 802.11b preamble gate (-97 dBm) falls at ~270 m outdoors
    assert outdoor.distance_at_dbm(-97) == pytest.approx(269.6, abs=0.1)
    assert outdoor.mean_rx_dbm(outdoor.distance_at_dbm(-97)) == pytest.approx(-97)
    assert params.psdu_bytes(1000) == 1028
    with pytest.raises(ValueError, match="profile 'attic'"):
        params.validation_grid(("attic",))
    spec = params.CurveSpec("outdoor", "802.11b", 1.0, 60, False)
    assert spec.max_distance_m() == 280.0
    assert math.isclose(spec.max_distance_m() % params.STEP_M, 0)


def test_clean_flags_drops_the_flaws_of_debians_pc_files(tmp_path):
    lib = tmp_path / "libthere.so"
    lib.touch()
    flags = f"-I/usr; -I/usr/include -lns3-wifi {lib} /nonexistent/libgsl.so"
    assert build.clean_flags(flags) == ["-I/usr/include", "-lns3-wifi", str(lib)]


def test_without_libns3_dev_the_build_names_the_packages_to_install(tmp_path, monkeypatch):
    # pkg-config finds nothing in an empty search path, as on a machine without libns3-dev
    monkeypatch.setenv("PKG_CONFIG_LIBDIR", str(tmp_path))
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path))
    monkeypatch.setenv("MANETKIT_NS3_CACHE", str(tmp_path / "cache"))
    with pytest.raises(build.Ns3Unavailable, match="apt-get install .*libns3-dev"):
        build.build("per")
    assert not (tmp_path / "cache").exists()


def test_without_pkg_config_the_build_names_the_packages_too(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no pkg-config, no g++
    with pytest.raises(build.Ns3Unavailable, match="not found.*apt-get install .*libns3-dev"):
        build.build("chain")


def test_bench_medium_oracle_without_ns3_is_a_clear_user_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PKG_CONFIG_LIBDIR", str(tmp_path))
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path))
    rc = cli.main(["bench", "medium", "--oracle", "ns3", "--out", str(tmp_path / "out")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "ns-3 development files not found" in err and "libns3-dev" in err
