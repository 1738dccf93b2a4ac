"""Write a MINJA-style scenario folder (a simulation of MINJA; no MINJA data is public).

python bench/make_scenarios.py --kind qa|rap --rho 0.1 --seed 0 --size 1000 --out DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scenarios import DEFAULT_DATA, KINDS, ScenarioError, build, write_scenario  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=KINDS, required=True)
    ap.add_argument("--rho", type=float, default=0.1, help="contamination, 0.05 ... 0.5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=1000, help="memories in the store")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args(argv)
    try:
        scenario = build(args.kind, rho=args.rho, seed=args.seed, size=args.size, data=args.data)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_scenario(scenario, args.out)
    m = scenario.meta
    print(
        f"{args.out}: {m['kind']} ({m['note'].split(':')[0]}), {m['size']} memories, "
        f"{m['injected']} injected / {m['relevant_clean']} relevant clean, rho={m['rho']:.3f}, "
        f"{len(scenario.probes)} probes, {len(scenario.benign)} benign probes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
