"""The routing daemons on the lab medium: chain-5, n1 -> n5 over 4 hops."""

from __future__ import annotations

import json

import pytest

from tests.helpers.lab import SCENARIOS, nsexec, nspopen, status, wait_for, wait_ping

pytestmark = [pytest.mark.netns, pytest.mark.slow]


@pytest.mark.parametrize("protocol", ["aodv", "dsr"])
def test_chain5_ping_http_iperf(lab_factory, protocol, tmp_path, record_property):
    lab = lab_factory(SCENARIOS / "chain-5.yaml", "--stack", protocol, prefix=f"s{protocol[0]}")
    # Every daemon answers and hears exactly its chain neighbours.
    wait_for(
        lambda: status(lab, "n3").up_neighbours() == {"10.42.0.2", "10.42.0.4"},
        10,
        "n3's neighbours n2 and n4",
    )
    first = wait_ping(lab, "n1", "10.42.0.5", timeout=30)
    record_property("first_ping_s", round(first, 3))
    r = nsexec(lab, "n1", "ping", "-c", "5", "-i", "0.3", "-W", "3", "10.42.0.5", check=False)
    assert " 0% packet loss" in r.stdout, r.stdout

    # HTTP GET: curl in n1 against python's http.server in n5.
    (tmp_path / "www").mkdir()
    body = b"manetkit over four hops\n" * 400
    (tmp_path / "www" / "page.txt").write_bytes(body)
    srv = nspopen(
        lab,
        "n5",
        "python3",
        "-m",
        "http.server",
        "8080",
        "-b",
        "10.42.0.5",
        "-d",
        str(tmp_path / "www"),
    )
    try:
        wait_for(lambda: ":8080" in nsexec(lab, "n5", "ss", "-ltn").stdout, 10, "http.server")
        got = nsexec(
            lab,
            "n1",
            "curl",
            "-sS",
            "--max-time",
            "30",
            "http://10.42.0.5:8080/page.txt",
            timeout=40,
        ).stdout
        assert got.encode() == body
    finally:
        srv.terminate()
        srv.wait(5)

    # Bulk TCP: iperf3 n1 -> n5.
    nsexec(lab, "n5", "iperf3", "-s", "-1", "-D", "-B", "10.42.0.5")
    wait_for(lambda: ":5201" in nsexec(lab, "n5", "ss", "-ltn").stdout, 10, "iperf3 server")
    r = nsexec(lab, "n1", "iperf3", "-c", "10.42.0.5", "-t", "4", "-J", timeout=60)
    res = json.loads(r.stdout)
    kbps = res["end"]["sum_received"]["bits_per_second"] / 1e3
    record_property("iperf3_kbps", round(kbps))
    print(f"{protocol} chain-5 n1->n5: first ping {first:.2f} s, iperf3 {kbps:.0f} kbit/s")
    assert kbps > 20, res["end"]
    # The middle nodes forwarded in userspace and nothing arrived malformed.
    for n in ("n2", "n3", "n4"):
        dp = status(lab, n).counters.dataplane
        assert dp["rx_frames"] > 100 and dp["tx_frames"] > 100
        assert dp["malformed_ipv4"] == dp["malformed_short"] == 0
