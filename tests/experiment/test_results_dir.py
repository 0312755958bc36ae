"""A results directory holds one spec's runs: another spec is refused (its spec.yaml was
overwritten before, and the runs of two specs mixed); the same spec resumes, also with
more repeats."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.lab import SCENARIOS, manetkit

SPEC = """\
name: rd
scenarios: [sc.yaml]          # relative to the spec: also when read back from the copy
stacks: [dsr]
proxies: [none]
speeds: [0]
seeds: [1]
duration_s: 5
traffics:
  - kind: bulk
    pairs: [[n1, n3]]
"""


def test_another_spec_is_refused_and_the_same_one_resumes(tmp_path: Path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "sc.yaml").write_text((SCENARIOS / "chain-3.yaml").read_text())
    first = specs / "a.yaml"
    first.write_text(SPEC)
    out = tmp_path / "out"
    # --limit 0: the directory and its spec.yaml are made, no run (no lab)
    manetkit("experiment", str(first), "--out", str(out), "--limit", "0", "--no-report")
    assert (out / "spec.yaml").read_text() == SPEC
    # the same spec again, or reworded (comments, order, a default written out): resumes
    again = specs / "b.yaml"
    again.write_text("# the same matrix\n" + SPEC.replace("duration_s: 5", "duration_s: 5.0"))
    for spec in (first, again):
        r = manetkit("experiment", str(spec), "--out", str(out), "--limit", "0", "--no-report")
        assert "made 0, already done 0" in r.stdout
    kept = (out / "spec.yaml").read_text()
    assert kept == again.read_text()  # the latest wording of the same spec
    # another matrix: refused before anything, spec.yaml left as it was
    other = specs / "c.yaml"
    other.write_text(SPEC.replace("seeds: [1]", "seeds: [1, 2]"))
    for extra in (["--limit", "0"], ["--dry-run"]):
        r = manetkit("experiment", str(other), "--out", str(out), *extra, check=False)
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"{out} holds the runs of another spec" in r.stderr
        assert f"{out / 'spec.yaml'} differs from {other}" in r.stderr
    assert (out / "spec.yaml").read_text() == kept
    # more repeats grow the same matrix: accepted, and the first repeat is already there
    (out / "runs" / "sc_dsr_none_v0_s1_bulk1.json").write_text('{"status": "ok"}')
    grown = specs / "d.yaml"
    grown.write_text(SPEC.replace("seeds: [1]", "seeds: [1]\nrepeats: 2"))
    r = manetkit("experiment", str(grown), "--out", str(out), "--dry-run")
    assert r.stdout.split("\n")[:2] == [
        "done  sc_dsr_none_v0_s1_bulk1",
        "todo  sc_dsr_none_v0_s1_bulk1_r2",
    ]
