"""``manetkit field ...``: the mac80211_hwsim rig (``vm-test``) and the IBSS bring-up
(``ibss-up`` / ``ibss-down``, as ``field-tests/`` and the ``manetkit-ibss@`` unit run it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from manetkit.console import console


def vm_test(args: argparse.Namespace) -> int:
    from manetkit.field.vmrig import DEFAULT_CACHE, run_rig

    result = run_rig(
        protocols=tuple(args.protocol or ["aodv", "dsr"]),
        cache=Path(args.cache) if args.cache else DEFAULT_CACHE,
        keep=Path(args.keep) if args.keep else None,
        timeout=args.timeout,
        record=Path(args.record) if args.record else None,
        profile=args.profile,
    )
    if args.json:
        report = {**result.report, "guest_seconds": result.report.get("seconds")}
        print(json.dumps(report | {"ok": result.ok, "seconds": round(result.seconds, 1)}))
        return 0 if result.ok else 1
    table = Table(title="mac80211_hwsim rig")
    for col in ("step", "result", "s", "detail"):
        table.add_column(col)
    for step in result.report.get("steps", []):
        detail = step["detail"] if isinstance(step["detail"], str) else json.dumps(step["detail"])
        table.add_row(
            step["name"], "ok" if step["ok"] else "FAILED", f"{step['seconds']:.1f}", detail[:160]
        )
    console.print(table)
    if not result.report:
        console.print("the guest wrote no result; its console said:")
        console.print(result.console[-3000:], markup=False)
    console.print(f"total {result.seconds:.1f} s: {'PASSED' if result.ok else 'FAILED'}")
    return 0 if result.ok else 1


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="field", metavar="ACTION")
    p = sub.add_parser(
        "vm-test",
        help="boot a Debian kernel in qemu, build a 3-radio mac80211_hwsim IBSS chain, test it",
    )
    p.add_argument(
        "--protocol", action="append", choices=["static", "aodv", "dsr"],
        help="routing over the chain: kernel static routes (static) or the manetkit daemon "
        "(aodv, dsr; their daemons run side by side on each radio); repeat for several in "
        "one boot (default: aodv and dsr)",
    )  # fmt: skip
    p.add_argument("--cache", help="kernel/initramfs cache (default /var/cache/manetkit/vm)")
    p.add_argument("--keep", metavar="DIR", help="copy the guest's console log and results here")
    p.add_argument(
        "--record", metavar="DIR", help="save station dump samples under DIR (tests/data)"
    )
    p.add_argument(
        "--profile", action="store_true",
        help="profile a daemon start in the guest (import times, cProfile) into --keep DIR",
    )  # fmt: skip
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before qemu is killed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=vm_test)

    from manetkit.field import ibss
    from manetkit.field.runner import run_plan

    up = sub.add_parser("ibss-up", help=ibss.UP_HELP, description=ibss.UP_HELP)
    ibss.up_arguments(up)
    up.set_defaults(func=lambda args: run_plan("ibss-up", ibss.build_up, args))
    down = sub.add_parser("ibss-down", help=ibss.DOWN_HELP, description=ibss.DOWN_HELP)
    ibss.common(down)
    down.set_defaults(func=lambda args: run_plan("ibss-down", ibss.build_down, args))
