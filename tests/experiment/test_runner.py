"""The runner: one JSON per run named by its parameters, finished runs skipped."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from manetkit.experiment import runner
from manetkit.experiment.spec import spec_from_dict

SPEC = {
    "name": "t",
    "scenarios": ["rwp-30"],
    "stacks": ["dsr", "aodv"],
    "speeds": [1, 20],
    "seeds": [1],
    "traffics": [{"kind": "bulk"}],
}


class FakeRuns:
    def __init__(self, fail: set[str] = frozenset()):
        self.made: list[str] = []
        self.fail = fail

    def __call__(self, spec, run, work):
        self.made.append(run.name)
        if run.name in self.fail:
            raise RuntimeError("lab broke")
        work.mkdir(parents=True)
        return {"status": "ok", "run": run.name, "params": run.params()}


def test_each_run_writes_its_json_and_a_second_pass_skips_them(tmp_path):
    spec = spec_from_dict(SPEC)
    names = [r.name for r in spec.runs()]
    assert names == ["rwp-30_dsr_none_v1_s1_bulk1", "rwp-30_aodv_none_v1_s1_bulk1",
                     "rwp-30_dsr_none_v20_s1_bulk1", "rwp-30_aodv_none_v20_s1_bulk1"]  # fmt: skip
    fake = FakeRuns()
    res = runner.run_matrix(spec, tmp_path, fake, limit=3)
    assert fake.made == names[:3] and res.left == names[3:]
    for n in names[:3]:
        assert json.loads((tmp_path / "runs" / f"{n}.json").read_text())["run"] == n
    assert not (tmp_path / "work").exists()  # raw files of finished runs are gone
    again = FakeRuns()
    res = runner.run_matrix(spec, tmp_path, again)
    assert again.made == names[3:]
    assert res.skipped == names[:3] and res.done == names[3:]


def test_a_failed_or_half_written_run_is_made_again(tmp_path):
    spec = spec_from_dict(SPEC)
    names = [r.name for r in spec.runs()]
    fake = FakeRuns(fail={names[1]})
    res = runner.run_matrix(spec, tmp_path, fake)
    assert res.failed == [names[1]] and len(res.done) == 3
    err = json.loads((tmp_path / "runs" / f"{names[1]}.error.json").read_text())
    assert err["status"] == "failed" and "lab broke" in err["error"]
    (tmp_path / "runs" / f"{names[2]}.json").write_text('{"status": "o')  # a crash mid-write
    again = FakeRuns()
    runner.run_matrix(spec, tmp_path, again)
    assert again.made == [names[1], names[2]]
    assert not (tmp_path / "runs" / f"{names[1]}.error.json").exists()


class InvalidFirst(FakeRuns):
    """Each run's first try did not keep real time; the later ones did."""

    def __init__(self, tries: dict[str, int]):
        super().__init__()
        self.tries = tries

    def __call__(self, spec, run, work):
        doc = super().__call__(spec, run, work)
        self.tries[run.name] = self.tries.get(run.name, 0) + 1
        valid = self.tries[run.name] > 1 or run.name.startswith("rwp-30_aodv")
        (work / runner.KEEP).mkdir()
        (work / runner.KEEP / "snapshot-start.json.gz").write_bytes(b"x")
        return doc | {"fidelity": {"valid": valid, "reasons": [] if valid else ["lag"]}}


def test_redo_invalid_makes_only_the_invalid_runs_again_and_keeps_the_first_tries(tmp_path):
    spec = spec_from_dict(SPEC)
    names = [r.name for r in spec.runs()]
    tries: dict[str, int] = {}
    runner.run_matrix(spec, tmp_path, InvalidFirst(tries))
    dsr = [n for n in names if "_dsr_" in n]
    assert [runner.state(tmp_path, r) for r in spec.runs()] == [
        "invalid" if n in dsr else "done" for n in names
    ]
    plain = InvalidFirst(tries)
    runner.run_matrix(spec, tmp_path, plain)
    assert plain.made == []  # without the flag an invalid run counts as done
    again = InvalidFirst(tries)
    res = runner.run_matrix(spec, tmp_path, again, redo_invalid=True)
    assert again.made == dsr and res.done == dsr
    runs = tmp_path / "runs"
    for n in dsr:
        first = json.loads((runs / f"{n}.invalid-1.json").read_text())
        assert first["fidelity"]["valid"] is False and first["run"] == n
        assert (runs / f"{n}.invalid-1" / "snapshot-start.json.gz").exists()
        assert json.loads((runs / f"{n}.json").read_text())["fidelity"]["valid"] is True
        assert (runs / n / "snapshot-start.json.gz").exists()
    assert all(runner.state(tmp_path, r) == "done" for r in spec.runs())
    assert runner.run_matrix(spec, tmp_path, InvalidFirst(tries), redo_invalid=True).done == []


def test_a_run_invalid_twice_is_counted_twice_in_the_report_summary():
    from manetkit.experiment.report import fidelity_summary

    bad = {"status": "ok", "run": "r", "fidelity": {"valid": False, "reasons": ["lag"]}}
    good = {"status": "ok", "run": "r", "fidelity": {"valid": True, "reasons": []}}
    summary = fidelity_summary(
        [bad, bad | {"fidelity": {"valid": False, "reasons": ["drops"]}}, good]
    )
    assert summary["valid"] == 1
    assert summary["invalid"] == {"r": ["lag"], "r#2": ["drops"]}


def test_interrupting_a_run_leaves_no_json_for_it(tmp_path):
    spec = spec_from_dict(SPEC)

    def interrupted(spec, run, work):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run_matrix(spec, tmp_path, interrupted)
    assert list((tmp_path / "runs").iterdir()) == []


def test_the_spec_is_kept_beside_the_runs_even_when_it_lives_there(tmp_path):
    spec_file = tmp_path / "elsewhere.yaml"
    spec_file.write_text("name: t\n")
    spec = spec_from_dict(SPEC)
    runner.run_matrix(spec, tmp_path / "out", FakeRuns(), limit=0, spec_file=spec_file)
    assert (tmp_path / "out" / "spec.yaml").read_text() == "name: t\n"
    # the results directory is the spec's own directory (docs/results/NAME/spec.yaml)
    runner.run_matrix(spec, tmp_path / "out", FakeRuns(), limit=0,
                      spec_file=tmp_path / "out" / "spec.yaml")  # fmt: skip
    assert (tmp_path / "out" / "spec.yaml").read_text() == "name: t\n"


def test_a_signal_stops_the_matrix_and_a_forked_helper_dies_by_it():
    """pyroute2's netns.create forks without exec; had its helper kept the handler, it
    would raise there, unwind nodes.up in the child and take the parent's lab down (the
    child's reset is manetkit.lab.netns's, tests/lab/test_netns_fork.py)."""
    import os
    import signal

    from manetkit.bench.labrun import interrupt as _stop
    from manetkit.lab import netns  # noqa: F401 - the runner imports it (the fork reset)

    with pytest.raises(KeyboardInterrupt):
        _stop(signal.SIGTERM, None)
    old = signal.signal(signal.SIGTERM, _stop)
    try:
        pid = os.fork()
        if pid == 0:  # the helper: must die, never raise
            code = 1
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except BaseException:
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGTERM


class InvalidTimes(FakeRuns):
    """Each run is invalid on its first ``bad`` tries (by name), valid after them."""

    def __init__(self, bad: dict[str, int]):
        super().__init__()
        self.bad = bad

    def __call__(self, spec, run, work):
        doc = super().__call__(spec, run, work)
        valid = self.made.count(run.name) > self.bad.get(run.name, 0)
        return doc | {"fidelity": {"valid": valid, "reasons": [] if valid else ["lag"]}}


def test_retry_invalid_makes_an_invalid_run_again_at_once_up_to_n_times(tmp_path):
    spec = spec_from_dict(SPEC)
    names = [r.name for r in spec.runs()]
    # names[0] valid at its 2nd try; names[1] invalid 5 times, more than 2 retries allow
    fake = InvalidTimes({names[0]: 1, names[1]: 5})
    res = runner.run_matrix(spec, tmp_path, fake, retry_invalid=2)
    # each retry follows its invalid try at once, before the next run
    assert fake.made == [names[0], names[0], names[1], names[1], names[1], names[2], names[3]]
    assert res.done == names and res.failed == []
    runs = tmp_path / "runs"
    assert sorted(p.name for p in runs.glob("*.invalid-*.json")) == sorted(
        [f"{names[0]}.invalid-1.json", f"{names[1]}.invalid-1.json", f"{names[1]}.invalid-2.json"]
    )
    states = [runner.state(tmp_path, r) for r in spec.runs()]
    assert states == ["done", "invalid", "done", "done"]  # out of retries: stays invalid
    # the report's fidelity count sees every try: 3 valid runs, names[1] invalid 3 times
    from manetkit.experiment.report import fidelity_summary, load_runs

    summary = fidelity_summary(load_runs(tmp_path))
    assert summary["valid"] == 3 and len(summary["invalid"]) == 4


def test_a_retry_that_fails_leaves_the_run_failed_and_its_invalid_try_on_record(tmp_path):
    spec = spec_from_dict(SPEC | {"stacks": ["dsr"], "speeds": [1]})
    (name,) = [r.name for r in spec.runs()]

    class FailsOnRetry(InvalidTimes):
        def __call__(self, spec, run, work):
            if self.made.count(run.name) == 1:
                self.made.append(run.name)
                raise RuntimeError("lab broke")
            return super().__call__(spec, run, work)

    res = runner.run_matrix(spec, tmp_path, FailsOnRetry({name: 1}), retry_invalid=3)
    assert res.done == [] and res.failed == [name]
    assert (tmp_path / "runs" / f"{name}.invalid-1.json").exists()
    assert (tmp_path / "runs" / f"{name}.error.json").exists()


def test_a_negative_retry_count_is_refused(tmp_path):
    from tests.helpers.lab import manetkit

    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps(SPEC))
    r = manetkit("experiment", str(spec), "--retry-invalid", "-1", check=False)
    assert r.returncode == 2 and "--retry-invalid: -1 is negative" in r.stderr


def test_only_stacks_makes_those_stacks_runs_and_leaves_the_rest_to_do(tmp_path, monkeypatch):
    spec = spec_from_dict(SPEC)
    names = [r.name for r in spec.runs()]
    fake = FakeRuns()
    shown = io.StringIO()
    monkeypatch.setattr(runner, "console", Console(file=shown, width=200))
    res = runner.run_matrix(spec, tmp_path, fake, only_stacks=frozenset({"aodv"}))
    assert fake.made == [n for n in names if "_aodv_" in n] == res.done
    assert res.left == [n for n in names if "_dsr_" in n]
    n = len(res.done)  # the bar counts this pass's runs only, so it ends full
    assert f"{n}/{n}" in shown.getvalue()
    # the same matrix without the filter then makes only what is left
    again = FakeRuns()
    res = runner.run_matrix(spec, tmp_path, again)
    assert again.made == [n for n in names if "_dsr_" in n] and res.left == []


def test_only_stacks_refuses_a_stack_the_spec_does_not_run(tmp_path):
    from tests.helpers.lab import manetkit

    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "out"
    r = manetkit("experiment", str(spec), "--out", str(out), "--only-stacks", "aodv,babeld",
                 "--dry-run", check=False)  # fmt: skip
    assert r.returncode == 2
    assert "--only-stacks: babeld not in the spec (its stacks: dsr, aodv)" in r.stderr
    r = manetkit("experiment", str(spec), "--out", str(out), "--only-stacks", "aodv",
                 "--dry-run")  # fmt: skip
    listed = [line.split()[-1] for line in r.stdout.splitlines() if line.startswith("todo")]
    assert listed and all("_aodv_" in n for n in listed)
