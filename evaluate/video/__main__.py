"""Command line of the video reading (docs/design.md §12).

    python -m evaluate.video score RESULTS DAVIS_ROOT [--sequences S ...] [--sequences-file FILE] [--resolution R]

Scores RESULTS (DAVIS's results layout: RESULTS/<sequence>/<frame>.png) against the DAVIS-layout ground truth under
DAVIS_ROOT with the official semi-supervised measures, and prints J&F, J and F (Mean, Recall, Decay) in percent,
then one row per object (`<sequence>_<id>`, as DAVIS's per-sequence table). Exit 1 with one line on a folder that
cannot be scored.
"""

from __future__ import annotations

import argparse
import logging
import sys

from evaluate import EvaluationError
from evaluate.datasets.davis import RESOLUTION, DavisDataset
from evaluate.video.measures import MEASURES, TITLES, VideoScores
from evaluate.video.score import score_results


def format_scores(scores: VideoScores) -> str:
    """The summary line and the per-object table as text."""
    summary = scores.summary()
    widths = [max(9, len(TITLES[m]) + 1) for m in MEASURES]
    lines = ["".join(f"{TITLES[m]:>{w}}" for m, w in zip(MEASURES, widths)),
             "".join(f"{summary[m]:>{w}.2f}" for m, w in zip(MEASURES, widths)), ""]
    rows = scores.per_object()
    name_width = max([len("Sequence")] + [len(row["name"]) for row in rows])
    lines.append(f"{'Sequence':<{name_width}}{'frames':>8}" + "".join(f"{TITLES[m]:>{w}}"
                                                                      for m, w in zip(MEASURES, widths)))
    for row in rows:
        lines.append(f"{row['name']:<{name_width}}{row['frames']:>8}" + "".join(f"{row[m]:>{w}.2f}"
                                                                              for m, w in zip(MEASURES, widths)))
    lines.append("")
    lines.append(f"{len(scores.sequences)} sequence(s), {len(rows)} object(s), in percent; the first and the last "
                 "annotated frame of each sequence are not scored")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.video", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score a results folder against a DAVIS-layout ground truth")
    score.add_argument("results", help="folder of <sequence>/<frame>.png index PNGs")
    score.add_argument("davis_root", help="DAVIS-layout folder (JPEGImages/<res>/, Annotations/<res>/)")
    score.add_argument("--sequences", nargs="+", metavar="S", help="score only these sequences, in this order")
    score.add_argument("--sequences-file", metavar="FILE",
                       help="sequence list, one a line, relative to DAVIS_ROOT unless absolute "
                            "(e.g. ImageSets/2017/val.txt); default: every sequence folder")
    score.add_argument("--resolution", default=RESOLUTION, help=f"DAVIS's resolution folder (default {RESOLUTION})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        dataset = DavisDataset(args.davis_root, args.resolution, args.sequences_file)
        scores = score_results(args.results, dataset, args.sequences)
    except EvaluationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(format_scores(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
