"""The schedule fuzzer at length: N random primitive sequences on random small chains.

    .venv/bin/python experiments/fuzz_schedules.py 20000 [--seed 0] [--compile-every 25]
        [--output results/fuzz_schedules.md]

Example ``k`` is drawn with ``random.Random(seed + k)`` by the generator of
``tests/schedule/test_schedule_fuzz.py`` (``tests/schedule/fuzz_chains.py`` and
``fuzz_steps.py``): a chain of NHWC/NCHW convolutions, depthwise, pools, dense, relu,
relu6, add, resize (float32, int32, int8) and up to eight primitive calls with arguments
biased toward valid ones. Each accepted schedule is replayed from its trace, lowered with
the verifier, and its kernel run as plain Python against the numpy reference; every
``--compile-every``-th example that reaches a kernel is also compiled with numba and run.

The report (rewritten every 500 examples, so a stopped run leaves its table) counts, per
primitive, the calls drawn, accepted and refused; the refusals by primitive and reason
(names and numbers blanked); the share of sequences that reach a kernel; and every defect
(wrong output, late refusal, other exception) with its chain and steps.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "schedule"))

from fuzz_chains import RandomChooser  # noqa: E402
from fuzz_steps import Outcome, run_example  # noqa: E402


class Tally:
    def __init__(self) -> None:
        self.examples = 0
        self.ran = 0
        self.compiled = 0
        self.depths: collections.Counter[int] = collections.Counter()
        self.drawn: collections.Counter[str] = collections.Counter()
        self.accepted: collections.Counter[str] = collections.Counter()
        self.refusals: collections.Counter[tuple[str, str]] = collections.Counter()
        self.defects: list[tuple[int, Outcome]] = []

    def add(self, seed: int, o: Outcome) -> None:
        self.examples += 1
        self.ran += o.ran
        self.compiled += o.compiled
        self.depths[len(o.steps)] += 1
        for op, _ in o.steps:
            self.drawn[op] += 1
            self.accepted[op] += 1
        for op, reason in o.refusals:
            self.drawn[op] += 1
            self.refusals[(op, reason)] += 1
        if o.defect:
            self.defects.append((seed, o))


def report(t: Tally, args: argparse.Namespace, seconds: float, done: bool) -> str:
    pct = lambda a, b: f"{100 * a / b:.1f}%" if b else "-"  # noqa: E731
    lines = [
        "# Schedule fuzzer",
        "",
        f"`.venv/bin/python experiments/fuzz_schedules.py {args.n} --seed {args.seed} --compile-every {args.compile_every}`"
        + ("" if done else f" (stopped after {t.examples} examples)"),
        "",
        f"- examples: {t.examples} in {seconds:.0f} s ({1000 * seconds / max(t.examples, 1):.0f} ms each)",
        f"- sequences whose accepted steps reach a kernel (lowered, generated and run as Python): {t.ran} ({pct(t.ran, t.examples)})",
        f"- of those also compiled with numba and run: {t.compiled}",
        f"- defects (wrong output, refusal after acceptance, other exception): {len(t.defects)}",
        "- accepted steps per sequence: " + ", ".join(f"{d}: {t.depths[d]}" for d in sorted(t.depths)),
        "",
        "## Calls by primitive",
        "",
        "| primitive | drawn | accepted | refused | accepted share |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for op in sorted(t.drawn, key=lambda o: -t.drawn[o]):
        refused = t.drawn[op] - t.accepted[op]
        lines.append(f"| {op} | {t.drawn[op]} | {t.accepted[op]} | {refused} | {pct(t.accepted[op], t.drawn[op])} |")
    lines += ["", "## Refusals by primitive and reason", "", "| primitive | reason | count |", "| --- | --- | ---: |"]
    for (op, reason), n in sorted(t.refusals.items(), key=lambda kv: (kv[0][0], -kv[1])):
        lines.append(f"| {op} | {reason.replace('|', '/')} | {n} |")
    lines += ["", "## Defects", ""]
    if not t.defects:
        lines.append("None.")
    for seed, o in t.defects:
        lines += [f"### seed {args.seed + seed}", "", "```", o.report(), "```", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, help="number of examples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-every", type=int, default=25, help="compile one in this many examples that reach a kernel")
    parser.add_argument("--output", type=Path, default=ROOT / "results" / "fuzz_schedules.md")
    args = parser.parse_args()
    t = Tally()
    start = time.perf_counter()
    for k in range(args.n):
        compile_kernel = args.compile_every > 0 and (t.ran + 1) % args.compile_every == 0
        t.add(k, run_example(RandomChooser(args.seed + k), compile_kernel=compile_kernel))
        if (k + 1) % 500 == 0:
            args.output.write_text(report(t, args, time.perf_counter() - start, done=False), encoding="utf-8")
            print(f"{k + 1} examples, {t.ran} ran, {t.compiled} compiled, {len(t.defects)} defects", flush=True)
    args.output.write_text(report(t, args, time.perf_counter() - start, done=True), encoding="utf-8")
    print(f"done: {t.examples} examples, {t.ran} ran, {t.compiled} compiled, {len(t.defects)} defects")


if __name__ == "__main__":
    main()
