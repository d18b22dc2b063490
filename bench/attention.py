"""The cost of the attention-spread reading (docs/design.md §13) in the extract job: with it against without it.

    .venv/bin/python bench/attention.py [--images N] [--batch B] [--threads T] [--repeats R] [--architectures A ...]

--batch and --threads default to the workflow's `features.batch_size` and `features.threads` (the config schema), so
the figures are those of one extract job. On real coco2017-mini photos (../shared/data/coco2017-mini, decoded and
normalised as the extract job does; seeded random inputs where it is absent), per ViT architecture (seeded), batch
by batch, the passes the extract job makes (`evaluate.readings.features.extract_inputs`):

- keys480: `model.last_keys(x480)`;
- tokens224: `model.tokens(x224)` (today's pass);
- tokens224 + reading: `evaluate.readings.attention_spread.tokens_and_spread(model, x224)` (the same pass giving the
  reading too: each block's q k^T per head in one batched product, entropy from the logits);
- tokens224 + reading, direct: the same pass with the rows' weights formed by softmax and H = -sum a ln a summed by
  `torch.special.entr` (a logarithm per weight): the plain way, measured against the chosen formula;
- tokens224 + reading, fused: the same pass with H = lse - q . (sum_j a_j k_j) / sqrt(d) from PyTorch's fused CPU
  attention kernel called with the keys as values (`aten._scaled_dot_product_flash_attention_for_cpu`, which also
  returns the rows' log-sum-exp): never forms the N x N rows, but is a private operator and cancels digits where
  the logits are large (docs/design.md §13: measured, left out). Skipped where the operator is absent.

Printed: seconds per image of each, in wall-clock time and in this process's CPU time (on a machine shared with
other processes the CPU time is the steadier measure of the work; with several threads it also counts their
waits), the minimum over the --repeats rounds and the median; and per way of computing the reading, from the best
rounds, the ratio of the 224-px pass with and without it, and of the extract job's network work (keys480 +
tokens224) with and without it (the target: at most 1.10). The passes take turns within each round, so load from
other processes falls on all alike; the load average before and after is printed beside the figures.
The tokens are checked bit-identical with and without the reading before anything is timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.machine import machine_line
from bench.scale import COCO_MINI, FEATURES, add_job_options
from evaluate.readings.attention_spread import row_entropy
from evaluate.readings.attention_spread import image_row_means, tokens_and_spread
from evaluate.demo.checkpoints import demo_network
from evaluate.networks.registry import ARCHITECTURES, REGISTRY

# XCiT has no reading (§13); the default is the seed's ViTs, the DINO family (docs/design.md §14) runs when named
VIT_ARCHITECTURES = ("vit-s16", "vit-s16-layerscale", "augvit-s16")
ALL_VIT_ARCHITECTURES = VIT_ARCHITECTURES + tuple(
    name for name in reversed(ARCHITECTURES) if REGISTRY[name].block and name not in VIT_ARCHITECTURES)


FUSED = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def tokens_with_rows(model: torch.nn.Module, x: torch.Tensor, rows_of) -> torch.Tensor:
    """The 224-px pass with each block's rows' entropy from `rows_of(q, k) -> (B, heads, N)`, reduced per image as
    the product does (`image_row_means`)."""
    means: list[tuple[torch.Tensor, torch.Tensor]] = []

    def tap(block: int, q: torch.Tensor, k: torch.Tensor) -> None:
        means.append(image_row_means(rows_of(q, k)))

    return model.tokens_tapped(x, tap)


def direct_rows(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Weights by softmax, H = sum entr(a) per row."""
    return row_entropy((q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1))


def fused_rows(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """H = lse - q . (sum_j a_j k_j) / sqrt(d), both from one fused attention call with the keys as values."""
    out, lse = FUSED(q, k, k)
    return lse - (q * out).sum(-1) * q.shape[-1] ** -0.5


def batches(images: int, batch: int, side: int = 480) -> tuple[str, list[tuple[torch.Tensor, torch.Tensor]]]:
    """(what the inputs are, [(x480, x224) per batch]), normalised as the extract job does; x480 at `side` (the
    network's `keys480_side`: 476 for patch 14)."""
    if (COCO_MINI / "annotations.json").is_file():
        from evaluate.datasets.coco import CocoDataset
        from evaluate.readings.inputs import DecodedInputs, model_batches

        dataset = CocoDataset(COCO_MINI / "images", COCO_MINI / "annotations.json")
        inputs = DecodedInputs(dataset, dataset.image_ids[:images], keys480_side=side)
        out = [(x480, x224) for _, x480, x224 in model_batches(inputs, batch)]
        return f"{images} coco2017-mini val photos", out
    gen = torch.Generator().manual_seed(0)
    out = []
    for start in range(0, images, batch):
        n = min(batch, images - start)
        out.append((torch.randn(n, 3, side, side, generator=gen), torch.randn(n, 3, 224, 224, generator=gen)))
    return f"{images} seeded random inputs ({COCO_MINI} absent)", out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=FEATURES["batch_size"],
                        help=f"images per round (default features.batch_size, {FEATURES['batch_size']})")
    add_job_options(parser, "--batch", "--threads")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds, after one warm-up batch (3)")
    parser.add_argument("--architectures", nargs="+", default=list(VIT_ARCHITECTURES), choices=ALL_VIT_ARCHITECTURES,
                        metavar="A", help=f"which architectures, of {', '.join(ALL_VIT_ARCHITECTURES)} (default: the "
                        f"seed's ViTs, {', '.join(VIT_ARCHITECTURES)})")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sides = {REGISTRY[name].geometry.keys480_side for name in args.architectures}
    by_side = {side: batches(args.images, args.batch, side) for side in sorted(sides, reverse=True)}
    what, data = by_side[max(sides)]
    n_images = sum(x224.shape[0] for _, x224 in data)
    print(machine_line())
    print(f"{what}, batch {args.batch}, "
          f"{args.repeats} rounds; load average before {os.getloadavg()[0]:.1f} (other processes share the CPUs)")
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for architecture in args.architectures:
        model = demo_network(architecture, 0).eval()
        data = by_side[model.geometry.keys480_side][1]
        passes = {
            "keys480": lambda x480, x224, m=model: m.last_keys(x480),
            "tokens224": lambda x480, x224, m=model: m.tokens(x224),
            "tokens224 + reading": lambda x480, x224, m=model: tokens_and_spread(m, x224),
            "tokens224 + reading, direct": lambda x480, x224, m=model: tokens_with_rows(m, x224, direct_rows),
        }
        if FUSED is not None:
            passes["tokens224 + reading, fused"] = lambda x480, x224, m=model: tokens_with_rows(m, x224, fused_rows)
        names = list(passes)
        clocks = {"wall": time.perf_counter, "CPU": time.process_time}
        seconds = {clock: {name: [] for name in names} for clock in clocks}
        with torch.inference_mode():
            x480, x224 = data[0]
            plain = model.tokens(x224[:2])
            if not torch.equal(plain, tokens_and_spread(model, x224[:2])[0]):
                raise SystemExit(f"{architecture}: the tokens differ with the reading on")
            for name in names:  # warm-up
                passes[name](x480[:1], x224[:1])
            for r in range(args.repeats):
                totals = {clock: dict.fromkeys(names, 0.0) for clock in clocks}
                for b, (x480, x224) in enumerate(data):
                    shift = (r + b) % len(names)
                    for name in names[shift:] + names[:shift]:  # take turns, so load falls on every pass alike
                        starts = {clock: read() for clock, read in clocks.items()}
                        passes[name](x480, x224)
                        for clock, read in clocks.items():
                            totals[clock][name] += read() - starts[clock]
                for clock in clocks:
                    for name in names:
                        seconds[clock][name].append(totals[clock][name] / n_images)
        print(f"{architecture}: seconds per image, the best round [the median]")
        best = {clock: {name: min(v) for name, v in by_name.items()} for clock, by_name in seconds.items()}
        median = {clock: {name: statistics.median(v) for name, v in by_name.items()}
                  for clock, by_name in seconds.items()}
        for name in names:
            print(f"  {name:28s} " + ", ".join(f"{clock} {best[clock][name]:.3f} [{median[clock][name]:.3f}]"
                                                for clock in clocks))
        for name in names[2:]:
            way = name.removeprefix("tokens224 + reading").removeprefix(", ") or "chosen"
            ratios = []
            for clock in clocks:
                values = best[clock]
                job = values["keys480"] + values["tokens224"]
                ratios.append(f"{clock}: 224-px pass {values[name] / values['tokens224']:.3f}, extract job "
                              f"{(values['keys480'] + values[name]) / job:.3f}")
            print(f"  with/without the reading ({way}), best rounds: {'; '.join(ratios)}")
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    print(f"CPU time {cpu:.0f} s over {wall:.0f} s wall = {cpu / wall:.2f} of {torch.get_num_threads()} threads busy; "
          f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
