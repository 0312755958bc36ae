"""``manetkit lab map`` in a real browser against a real chain-5 DSR lab: the nodes, the
route n1 -> n5 drawn through n2..n4, the drawing following ``lab move``, a second map on
the same port refused, and the page saying so when the lab goes down."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.browser import chromium, free_port, require_browser
from tests.helpers.lab import SCENARIOS, manetkit, nspopen, wait_for

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def _flow_path(driver, src: str, dst: str) -> str | None:
    els = driver.find_elements(
        "css selector", f'#flows g.flow[data-src="{src}"][data-dst="{dst}"][data-role="primary"]'
    )
    return els[0].get_attribute("data-path") if els else None


def _points(driver, src: str, dst: str) -> str | None:
    els = driver.find_elements(
        "css selector",
        f'#flows g.flow[data-src="{src}"][data-dst="{dst}"][data-role="primary"] polyline',
    )
    return els[0].get_attribute("points") if els else None


def test_map_draws_the_chain_and_its_route_and_follows_a_move(lab_factory, tmp_path):
    require_browser()
    lab = lab_factory(SCENARIOS / "chain-5.yaml", "--stack", "dsr", prefix="mp")
    port = free_port()
    ping = nspopen(lab, "n1", "ping", "-i", "0.2", "-W", "1", "10.42.0.5")
    srv = subprocess.Popen(
        [sys.executable, "-m", "manetkit.cli", "lab", "map", "--name", lab, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    driver = None
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: _answers(port), 15, "the map's page")
        # A second map on the same port: a clear refusal, no traceback.
        again = manetkit("lab", "map", "--name", lab, "--port", str(port), check=False)
        assert again.returncode == 2
        assert f"--port {port}" in again.stderr and "already in use" in again.stderr
        assert "Traceback" not in again.stderr

        driver = chromium(tmp_path / "profile")
        driver.get(url)

        def nodes_drawn() -> bool:
            nodes = driver.find_elements("css selector", "#nodes g.node")
            return len(nodes) == 5 and all(n.get_attribute("transform") for n in nodes)

        wait_for(nodes_drawn, 15, "5 nodes on the page")
        labels = sorted(
            n.get_attribute("data-node")
            for n in driver.find_elements("css selector", "#nodes g.node")
        )
        assert labels == ["n1", "n2", "n3", "n4", "n5"]
        wait_for(
            lambda: _flow_path(driver, "n1", "n5") == "n1 n2 n3 n4 n5",
            30,
            "the route n1 -> n5 drawn through n2, n3, n4",
        )
        before = _points(driver, "n1", "n5")
        driver.save_screenshot(str(tmp_path / "map-chain5.png"))

        # n5 next to n3, out of n4's range: the route must go n1 n2 n3 n5.
        manetkit("lab", "move", "--name", lab, "n5", "400", "200")
        wait_for(
            lambda: _flow_path(driver, "n1", "n5") == "n1 n2 n3 n5",
            30,
            "the route n1 -> n5 redrawn through n3 to n5's new place",
        )
        # The page interpolates positions: the polyline has reached n5's new place once
        # two drawings in a row leave it where it is.
        last: list[str | None] = [None]

        def still() -> str | None:
            now = _points(driver, "n1", "n5")
            prev, last[0] = last[0], now
            return now if now == prev and now != before else None

        after = wait_for(still, 10, "the route's polyline to stop moving", 0.2)
        assert after != before and len(after.split()) == 4
        driver.save_screenshot(str(tmp_path / "map-chain5-moved.png"))
        assert (tmp_path / "map-chain5-moved.png").stat().st_size > 10_000

        manetkit("lab", "down", "--name", lab)
        banner = driver.find_element("id", "banner")
        wait_for(
            lambda: banner.is_displayed() and "gone" in banner.text,
            15,
            "the page saying the lab is gone",
        )
        assert lab in banner.text
    finally:
        if driver is not None:
            driver.quit()
        ping.kill()
        ping.wait()
        srv.terminate()
        out, err = srv.communicate(timeout=15)
    assert srv.returncode in (0, -15), err
    assert "Traceback" not in err, err
    assert "is gone" in out


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False
