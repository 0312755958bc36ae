#!/bin/bash
# The figures before and after the engines were recomposed from components, measured in
# one sitting, alternating the two checkouts: bench chain, bench dataplane, the flap spec
# and one mobility cell (cell.yaml: rwp-30, 20 m/s, DSR, one bulk flow, seeds 1-3).
#   git worktree add --detach /tmp/before 1c02908    # engines built by inheritance
#   git worktree add --detach /tmp/after main
#   flock /tmp/manetkit-heavy.lock bash run.sh /tmp/before /tmp/after OUT
#   python3 compare.py OUT                                # the tables of README.md
# About 50 minutes on a 2-core machine, one lab at a time.
set -eu
BEFORE=$1 AFTER=$2 OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
mk() {  # mk CHECKOUT ARGS...: that checkout's manetkit
    local src=$1; shift
    (cd "$src" && PYTHONPATH=$src python3 -c \
        "import sys; from manetkit.cli import main; sys.argv[0] = 'manetkit'; sys.exit(main())" "$@")
}
for v in before after; do src=$BEFORE; [ $v = after ] && src=$AFTER
    mk "$src" bench chain --out "$OUT/$v/chain"; done
for v in before after; do src=$BEFORE; [ $v = after ] && src=$AFTER
    mk "$src" bench dataplane --seconds 5 --out "$OUT/$v/dataplane"; done
for v in before after; do src=$BEFORE; [ $v = after ] && src=$AFTER
    mk "$src" experiment "$src/configs/experiments/flap.yaml" --out "$OUT/$v/flap"; done
for _ in 1 2 3; do for v in before after; do src=$BEFORE; [ $v = after ] && src=$AFTER
    mk "$src" experiment "$HERE/cell.yaml" --out "$OUT/$v/cell" --limit 1 --no-report; done; done
# seed 3 again, twice per checkout, each in its own directory (cell-s3-rK)
sed 's/seeds: \[1, 2, 3\]/seeds: [3]/' "$HERE/cell.yaml" > "$OUT/cell-s3.yaml"
for k in 2 3; do for v in after before; do src=$BEFORE; [ $v = after ] && src=$AFTER
    mk "$src" experiment "$OUT/cell-s3.yaml" --out "$OUT/$v/cell-s3-r$k" --no-report; done; done
