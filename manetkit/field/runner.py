"""Run or print the commands of a field-test script (``--dry-run``).

Every field-test script builds its whole plan first (commands and files to write), so
``--dry-run`` prints exactly what a real run executes, in order, and bad arguments are
refused before anything runs.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO


class ScriptError(Exception):
    """A refused argument or a failed step; the script prints it and exits 2."""


@dataclass(frozen=True, slots=True)
class Command:
    argv: list[str]
    check: bool = True  # a failure stops the script (False: cleanup steps)
    stdout: str | None = None  # append the command's output to this file

    def shell(self) -> str:
        text = shlex.join(self.argv)
        if self.stdout:
            text += f" >> {shlex.quote(self.stdout)} 2>&1"
        return text + ("" if self.check else " || true")


@dataclass(frozen=True, slots=True)
class WriteFile:
    path: str
    text: str
    mode: int = 0o644

    def shell(self) -> str:
        # A here-document that recreates the file exactly, then its permissions.
        body = self.text if self.text.endswith("\n") else self.text + "\n"
        return (
            f"cat > {shlex.quote(self.path)} <<'EOF'\n{body}EOF\n"
            f"chmod {self.mode:o} {shlex.quote(self.path)}"
        )


Step = Command | WriteFile


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)

    def run(self, *argv: str, check: bool = True, stdout: str | None = None) -> None:
        self.steps.append(Command(list(argv), check, stdout))

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        self.steps.append(WriteFile(path, text, mode))

    def render(self) -> str:
        return "\n".join(step.shell() for step in self.steps) + ("\n" if self.steps else "")

    def execute(self, out: TextIO = sys.stderr) -> None:
        for step in self.steps:
            print(f"+ {step.shell().splitlines()[0]}", file=out, flush=True)
            if isinstance(step, WriteFile):
                path = Path(step.path)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(step.text)
                path.chmod(step.mode)
                continue
            try:
                if step.stdout:
                    with open(step.stdout, "ab") as out_file:
                        done = subprocess.run(step.argv, stdout=out_file, stderr=subprocess.STDOUT)
                else:
                    done = subprocess.run(step.argv)
            except FileNotFoundError as exc:
                if step.check:
                    raise ScriptError(f"{step.argv[0]}: not installed ({exc})") from exc
                continue
            if done.returncode != 0 and step.check:
                raise ScriptError(f"step failed (exit {done.returncode}): {step.shell()}")


def in_netns(netns: str | None, *argv: str) -> tuple[str, ...]:
    """``argv`` run inside ``netns`` (``ip netns exec``) when one is given."""
    return ("ip", "netns", "exec", netns, *argv) if netns else argv


def main_wrapper(name: str, build, argv: list[str] | None, parser) -> int:
    """Parse, build the plan, then print it (``--dry-run``) or run it."""
    return run_plan(name, build, parser.parse_args(argv))


def run_plan(name: str, build, args: argparse.Namespace) -> int:
    """Build the plan from parsed ``args``, then print it (``--dry-run``) or run it."""
    try:
        plan = build(args)
        if args.dry_run:
            sys.stdout.write(plan.render())
        else:
            plan.execute()
    except ScriptError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    return 0
