"""``python -m kai_conformance.reports``: regenerate, merge or demonstrate the conformance reports without running pytest.

python -m kai_conformance.reports merge OUT DIR1 DIR2 ...   one report and one matrix from several report directories
python -m kai_conformance.reports generate DIR              rewrite DIR's reports from its records (e.g. after a crash)
python -m kai_conformance.reports sample OUT                a made-up report showing every status (demo, screenshot)
python -m kai_conformance.reports compare BASE NEW          exit 1 when NEW's metrics regressed past a threshold
python -m kai_conformance.reports diff BASE NEW             what changed: verdicts, observations, metrics, versions
python -m kai_conformance.reports flakes DIR1 DIR2 ...      each case's verdicts over many runs; flips on the same versions
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from kai_conformance.reports import generate
from kai_conformance.reports.across_runs import compare, diff, flakes
from kai_conformance.reports.sections import metrics


def _print(written: generate.Written, step_summary: bool = True) -> None:
    print(written.report.verdict.headline)
    print(f"  HTML report:      {written.html}")
    print(f"  Markdown summary: {written.markdown}")
    print(f"  JSON summary:     {written.json}")
    summary = generate.append_step_summary(written.markdown) if step_summary else None
    if summary is not None:
        print(f"  appended the Markdown summary to $GITHUB_STEP_SUMMARY ({summary})")


def _merge(out: Path, directories: list[Path], title: str) -> None:
    """Merge, then name the cases whose verdict changed over the merged runs with the versions unchanged."""
    _print(generate.merge(out, directories, title))
    print(flakes.merge_note(directories))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kai_conformance.reports", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser("merge", help="merge several report directories into OUT")
    merge.add_argument("out", type=Path, help="new directory for the merged report")
    merge.add_argument("dirs", type=Path, nargs="+", help="report directories (--report-dir of each run)")
    merge.add_argument("--title", default=None, help="the report's title (default: the inputs' own)")
    regenerate = commands.add_parser("generate", help="rewrite the reports of one report directory")
    regenerate.add_argument("dir", type=Path)
    regenerate.add_argument("--title", default=None, help="the report's title (default: the directory's own)")
    sample = commands.add_parser("sample", help="write a sample report (made-up data) into OUT")
    sample.add_argument("out", type=Path)
    gate = commands.add_parser(
        "compare",
        help="compare the performance metrics of two reports; exit 1 on a regression past the threshold",
        description="BASE and NEW are report directories or summary.json files; exit 0 no regression, "
        "1 regression, 2 usage error. See docs/reports.md.",
    )
    gate.add_argument("base", type=Path, help="the base report directory (or its summary.json), e.g. main's")
    gate.add_argument("new", type=Path, help="the new report directory (or its summary.json), e.g. the PR's")
    gate.add_argument("--threshold", type=float, default=compare.DEFAULT_THRESHOLD,
                      help="allowed slowdown as a fraction (default %(default)s = 20 %%)")  # fmt: skip
    gate.add_argument("--min-seconds", type=float, default=compare.DEFAULT_MIN_SECONDS,
                      help="a latency must also be this many seconds slower to regress (default %(default)s: the "
                      "Kubernetes timestamps behind it are whole seconds)")  # fmt: skip
    gate.add_argument("--metric", action="append", default=[], help="compare only this metric (repeatable)")
    gate.add_argument("--statistic", action="append", choices=metrics.STATISTICS,
                      help="gate on this statistic (repeatable; default p50 and p95)")  # fmt: skip
    changes = commands.add_parser(
        "diff",
        help="what changed between two report directories; exit 1 when a verdict changed or a metric regressed",
        description="BASE and NEW are report directories (e.g. runs against two KAI releases). Prints the versions, "
        "the verdicts that changed (with the version combination of each), the observations that differ and the metrics "
        "past the threshold; with --out, writes them as a self-contained HTML page. Exit 0 no verdict changed, 1 a verdict changed or a metric regressed, "
        "2 usage error. See docs/reports.md.",
    )
    changes.add_argument("base", type=Path, help="the base report directory, e.g. the run against the older release")
    changes.add_argument("new", type=Path, help="the new report directory, e.g. the run against the newer release")
    changes.add_argument("--out", type=Path, help="write the full HTML page to this file (default: none; never into "
                         "BASE or NEW unless named)")  # fmt: skip
    changes.add_argument("--threshold", type=float, default=compare.DEFAULT_THRESHOLD,
                         help="allowed slowdown as a fraction, as for compare (default %(default)s = 20 %%)")  # fmt: skip
    changes.add_argument("--min-seconds", type=float, default=compare.DEFAULT_MIN_SECONDS,
                         help="a latency must also be this many seconds slower to regress (default %(default)s)")  # fmt: skip
    changes.add_argument("--statistic", action="append", choices=metrics.STATISTICS,
                         help="gate on this statistic (repeatable; default p50 and p95)")  # fmt: skip
    flakes.add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "flakes":
        return flakes.command(args.dirs)
    if args.command == "diff":
        try:
            statistics = args.statistic or compare.DEFAULT_STATISTICS
            return diff.run(args.base, args.new, args.out, args.threshold, statistics, args.min_seconds)
        except diff.DiffError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return diff.USAGE
    if args.command == "compare":
        try:
            statistics = args.statistic or compare.DEFAULT_STATISTICS
            return compare.run(args.base, args.new, args.threshold, statistics, args.metric, args.min_seconds)
        except compare.CompareError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return compare.USAGE
    try:
        if args.command == "merge":
            _merge(args.out, args.dirs, args.title)
        elif args.command == "generate":
            title = args.title or generate.inherited_title([args.dir])
            _print(generate.write_reports(args.dir, generate.load(args.dir), title))
        else:
            from kai_conformance.reports import sample as sample_data

            with tempfile.TemporaryDirectory(prefix="kai-report-sample-") as inputs:
                directories = sample_data.write_run_dirs(Path(inputs))
                _print(generate.merge(args.out, directories, sample_data.TITLE), step_summary=False)
    except generate.NoResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
