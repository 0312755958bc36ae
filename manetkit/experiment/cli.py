"""``manetkit experiment SPEC.yaml`` runs a matrix; ``manetkit experiment report DIR``
makes its report (docs/experiments.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from manetkit.console import console
from manetkit.errors import UserError

if TYPE_CHECKING:
    from manetkit.experiment.spec import Spec


def run(args: argparse.Namespace) -> int:
    if args.target == "report":
        if args.dir is None:
            raise UserError("experiment report: give the results directory (DIR)")
        if args.html:
            from manetkit.experiment.htmlreport import make_html_report

            make_html_report(Path(args.dir))
            return 0
        from manetkit.experiment.report import make_report

        make_report(Path(args.dir))
        return 0
    if args.html:
        raise UserError("--html: only with `experiment report DIR`")
    if args.dir is not None:
        raise UserError(f"experiment {args.target}: unexpected argument {args.dir!r}")
    return run_spec(args)


def run_spec(args: argparse.Namespace) -> int:
    from manetkit.bench import labrun
    from manetkit.experiment import execute, runner, wrk
    from manetkit.experiment.spec import Wrk, check_stacks_built, load_spec
    from manetkit.lab import tcpcc

    if args.retry_invalid < 0:
        raise UserError(f"--retry-invalid: {args.retry_invalid} is negative (0 or more retries)")
    spec_file = Path(args.target)
    spec = load_spec(spec_file)
    out = Path(args.out) if args.out else Path("results") / spec.name
    _check_results_dir(out, spec_file, spec)
    only = only_stacks(args.only_stacks, spec)
    runs = [r for r in spec.runs() if only is None or r.stack in only]
    if args.dry_run:
        for r in runs:
            console.print(f"{runner.state(out, r)}  {r.name}")
        console.print(f"{len(runs)} runs")
        return 0
    check_stacks_built(spec)
    tcpcc.require(spec.congestion_control)
    if any(isinstance(t, Wrk) for t in spec.traffics):
        wrk.require()
    console.print(f"{spec.name}: {len(runs)} runs into {out}")
    # SIGTERM (and SIGINT in a background job) must still bring the current run's lab down
    with labrun.term_as_interrupt(), tcpcc.allowing(spec.congestion_control):
        res = runner.run_matrix(
            spec, out, execute.run_one, lock=args.lock, limit=args.limit, spec_file=spec_file,
            keep_work=args.keep_work, redo_invalid=args.redo_invalid,
            retry_invalid=args.retry_invalid, only_stacks=only,
        )  # fmt: skip
    console.print(
        f"made {len(res.done)}, already done {len(res.skipped)}, failed {len(res.failed)}, "
        f"left {len(res.left)} (run again to resume)"
    )
    if not args.no_report and (res.done or res.skipped):
        from manetkit.experiment.report import make_report

        make_report(out)
    return 1 if res.failed else 0


def only_stacks(arg: str | None, spec: Spec) -> frozenset[str] | None:
    """``--only-stacks A,B``: a subset of the spec's stacks (None: all of them)."""
    if arg is None:
        return None
    names = [s.strip() for s in arg.split(",") if s.strip()]
    unknown = [s for s in names if s not in spec.stacks]
    if not names or unknown:
        why = f"{', '.join(unknown)} not in the spec" if unknown else "no stack named"
        raise UserError(f"--only-stacks: {why} (its stacks: {', '.join(spec.stacks)})")
    return frozenset(names)


def _check_results_dir(out: Path, spec_file: Path, spec: Spec) -> None:
    """A results directory holds one spec's runs (its ``spec.yaml``): refuse another spec
    rather than overwrite it and mix runs. The same spec again (a resume) is fine, also
    with other ``repeats`` (the matrix grown or cut), reformatted or commented differently:
    the two are compared as parsed (paths in the copy read as relative to the given
    spec's directory, as they were written)."""
    from manetkit.configfile import read_yaml_mapping
    from manetkit.experiment.spec import spec_from_dict

    there = out / "spec.yaml"
    if not there.exists() or there.samefile(spec_file):
        return
    try:
        data = read_yaml_mapping(there, "experiment spec")
        old = spec_from_dict(data, str(there), spec_file.resolve().parent)
        # more (or fewer) repeats grow (or cut) the same matrix: its first runs are kept
        a, b = (sp.model_dump(mode="json", exclude={"repeats"}) for sp in (old, spec))
        same = a == b
    except UserError:  # not a valid spec (here): not this one
        same = False
    if not same:
        raise UserError(
            f"{out} holds the runs of another spec ({there} differs from {spec_file}): "
            f"give a new --out, or remove {out} to start over"
        )


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="SPEC.yaml|report", help="a spec to run, or: report")
    parser.add_argument("dir", nargs="?", metavar="DIR", help="with report: the results dir")
    parser.add_argument("--out", help="results directory (default results/<spec name>)")
    parser.add_argument("--lock", help="flock this file around each run (shared machines)")
    parser.add_argument("--limit", type=int, help="make at most this many runs, then stop")
    parser.add_argument("--dry-run", action="store_true", help="list the runs, done or not")
    parser.add_argument("--no-report", action="store_true", help="do not make the report")
    parser.add_argument(
        "--html", action="store_true", help="with report: also one self-contained report/index.html"
    )
    parser.add_argument("--keep-work", action="store_true", help="keep each run's raw files")
    parser.add_argument(
        "--redo-invalid", action="store_true",
        help="make the runs whose emulation did not hold again (the first tries stay, "
        "counted as invalid)",
    )  # fmt: skip
    parser.add_argument(
        "--retry-invalid", type=int, default=0, metavar="N",
        help="make a run that comes out invalid again at once, up to N more times "
        "(each invalid try stays, counted as invalid)",
    )  # fmt: skip
    parser.add_argument(
        "--only-stacks", metavar="A,B",
        help="make the runs of these stacks only (the others stay to do; "
        "e.g. a goal's stacks first)",
    )  # fmt: skip
    parser.set_defaults(func=run)
