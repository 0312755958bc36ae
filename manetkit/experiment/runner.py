"""Runs a matrix one run after another (never two labs at once: they share the CPU, and
timing on a two-core machine is only fair to the stack that runs alone).

The results directory is resumable: each run that finished writes ``runs/<name>.json``
(``Run.name``: scenario, stack, proxy, speed, seed, traffic), through the one result
writer (``manetkit.bench.report``); a run whose JSON is there with ``status: ok`` is
skipped, so a matrix stopped (Ctrl-C, ``--limit``, a crash) goes on where it was. A run
that fails leaves ``runs/<name>.error.json`` (why) and is tried again next time. The
spec is copied to ``spec.yaml`` beside the runs, so a report says what made it. What a
run keeps besides its JSON (``work/<name>/keep/``: the routing snapshots) moves to
``runs/<name>/``; the rest of its work directory goes unless ``--keep-work``.

``--redo-invalid`` makes every run whose fidelity verdict is invalid again: its JSON (and
kept files) move to ``runs/<name>.invalid-<k>.json`` first, so the report still counts it
among the invalid runs and a matrix's every invalid try stays on record.
``--retry-invalid N`` does the same at once, in the same pass: a run that comes out invalid
is set aside and made again, up to N more times, so a matrix left to run unattended ends
with its cells filled by valid runs where the machine allows.

``--only-stacks A,B`` makes the runs of those stacks only (the others stay to do), so a
cell's goal stacks can be finished before the rest of its matrix without another spec.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from manetkit.bench import labrun, report
from manetkit.console import console
from manetkit.experiment import validity
from manetkit.experiment.spec import Run, Spec

RunFn = Callable[[Spec, Run, Path], dict[str, Any]]
KEEP = "keep"  # a run's files to keep, under its work directory


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)  # made now
    skipped: list[str] = field(default_factory=list)  # already there
    failed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # not reached (--limit, --only-stacks)


def keep_files(src: Path, dest: Path) -> None:
    """Move the files a run kept (``src``) to its directory ``dest`` (replaced: a run
    made again keeps only its own files)."""
    if not src.is_dir():
        return
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(dest))


def result_path(out: Path, run: Run) -> Path:
    return out / "runs" / f"{run.name}.json"


def finished(out: Path, run: Run) -> dict[str, Any] | None:
    """The run's JSON when it is there, readable and ``status: ok``; else None."""
    try:
        doc = json.loads(result_path(out, run).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("status") == "ok" else None


def is_done(out: Path, run: Run) -> bool:
    """A run is done when its JSON is there, readable and ``status: ok``."""
    return finished(out, run) is not None


def state(out: Path, run: Run) -> str:
    """``todo``, ``done``, or ``invalid`` (done, but the emulation did not hold: made
    again with ``--redo-invalid``), for ``--dry-run``."""
    doc = finished(out, run)
    if doc is None:
        return "todo"
    return "invalid" if validity.of(doc) == "invalid" else "done"


def set_aside_invalid(out: Path, run: Run) -> Path | None:
    """Move ``run``'s JSON to ``runs/<name>.invalid-<k>.json`` (its kept files to
    ``runs/<name>.invalid-<k>/``) when the emulation did not hold in it, so the run is made
    again; the path it went to, or None when the run is not an invalid finished one.

    Every invalid run is made again, whatever its result: validity is the emulator's
    verdict on its timing, not on the stack, so this biases no stack (and the first try
    stays in the report's count of invalid runs)."""
    doc = finished(out, run)
    if doc is None or validity.of(doc) != "invalid":
        return None
    k = 1
    while (out / "runs" / f"{run.name}.invalid-{k}.json").exists():
        k += 1
    dest = out / "runs" / f"{run.name}.invalid-{k}.json"
    result_path(out, run).rename(dest)
    kept = out / "runs" / run.name
    if kept.is_dir():
        kept.rename(out / "runs" / f"{run.name}.invalid-{k}")
    return dest


def run_matrix(
    spec: Spec,
    out: Path,
    run_fn: RunFn,
    *,
    lock: str | None = None,
    limit: int | None = None,
    spec_file: Path | None = None,
    keep_work: bool = False,
    redo_invalid: bool = False,
    retry_invalid: int = 0,
    only_stacks: frozenset[str] | None = None,
) -> Outcome:
    """Make every run of ``spec`` not already done in ``out`` (with ``redo_invalid``, an
    invalid run counts as not done: :func:`set_aside_invalid`); at most ``limit`` runs
    (``--limit``); each under ``lock`` if given (taken per run, not for the matrix). A run
    that comes out invalid is set aside and made again up to ``retry_invalid`` times.
    With ``only_stacks``, the runs of other stacks are left to do (``Outcome.left``)."""
    runs = spec.runs()
    (out / "runs").mkdir(parents=True, exist_ok=True)
    copy = out / "spec.yaml"
    if spec_file is not None and not (copy.exists() and copy.samefile(spec_file)):
        shutil.copyfile(spec_file, copy)
    result = Outcome()
    todo = []
    for r in runs:
        if redo_invalid:
            set_aside_invalid(out, r)
        if is_done(out, r):
            result.skipped.append(r.name)
        elif only_stacks is not None and r.stack not in only_stacks:
            result.left.append(r.name)
        else:
            todo.append(r)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        # the runs left to other stacks are not this pass's: the bar ends full
        total = len(runs) - len(result.left)
        task = progress.add_task(spec.name, total=total, completed=len(result.skipped),
                                 current="")  # fmt: skip
        for k, r in enumerate(todo):
            if limit is not None and k >= limit:
                result.left += [x.name for x in todo[k:]]
                break
            progress.update(task, current=r.name)
            for attempt in range(1 + retry_invalid):
                if attempt and set_aside_invalid(out, r) is None:
                    break  # valid (or failed: a failure is tried again on the next pass)
                if attempt:
                    progress.console.print(f"[yellow]invalid[/] {r.name}: made again")
                _make_one(spec, r, out, run_fn, lock, keep_work, result, progress)
            progress.advance(task)
        progress.update(task, current="")
    with contextlib.suppress(OSError):
        (out / "work").rmdir()  # only when empty
    return result


def _make_one(
    spec: Spec, r: Run, out: Path, run_fn: RunFn, lock: str | None, keep_work: bool,
    result: Outcome, progress: Progress,
) -> None:  # fmt: skip
    """One try of run ``r``: its JSON (or ``.error.json``) written, its kept files moved."""
    work = out / "work" / r.name
    err = out / "runs" / f"{r.name}.error.json"
    try:
        with labrun.locked(lock):
            doc = run_fn(spec, r, work)
    except Exception as exc:  # noqa: BLE001 - one failed run must not stop the matrix
        result.failed.append(r.name)
        if r.name in result.done:  # a retry of an invalid try failed: no result now
            result.done.remove(r.name)
        report.write(out / "runs", f"{r.name}.error", {
            "status": "failed", "run": r.name, "params": r.params(),
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
        })  # fmt: skip
        progress.console.print(f"[red]failed[/] {r.name}: {type(exc).__name__}: {exc}")
        return
    report.write(out / "runs", r.name, doc)
    keep_files(work / KEEP, out / "runs" / r.name)
    err.unlink(missing_ok=True)
    if r.name not in result.done:
        result.done.append(r.name)
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
