"""`reprobot contrast repros/<id>`: which single change makes the repro pass, by running each one."""
from __future__ import annotations

import argparse

from bot.commands._options import add_rerun_options, notifier, whole


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("contrast", help="try one change at a time: which ones make the repro pass?",
                       description="For each keyword, boolean, device, dtype and dict entry left in the "
                                   "repro, try small alternatives one at a time (cold runs, same signature) "
                                   "and report which make it pass, keep the failure, or change it.")
    add_rerun_options(p, "contrast.json")
    p.add_argument("--jobs", type=whole("--jobs", 1), default=1, help="changes run in parallel (default: 1)")
    p.add_argument("--gpu", default=None, help="CUDA_VISIBLE_DEVICES for the runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from bot.output import console
    from bot.rerun.contrast import ContrastStopped
    from bot.rerun.report import print_contrast
    from bot.rerun.steps import run_contrast
    from bot.store import ReproDir

    folder = ReproDir.open(args.repro_dir)
    notify = notifier(args)
    try:
        results, data = run_contrast(folder, args.python, jobs=args.jobs, gpu=args.gpu, timeout=args.timeout,
                                     notify=notify)
    except ContrastStopped as stopped:
        # what ran before the stop, shown as a finished run shows it; the stop's line and exit
        # code (130, or 143 for SIGTERM) follow from bot/cli.py
        if args.json:
            print(json.dumps(stopped.data, indent=2))
        else:
            print_contrast(stopped.results, stopped.data.get("handback"))
        raise
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print_contrast(results, data.get("handback"))
    console.print(f"{data['runs']} runs; written to {folder.path / 'contrast.json'}", highlight=False, soft_wrap=True)
    return 0
