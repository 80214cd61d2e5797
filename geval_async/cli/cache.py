"""The ``cache`` commands: merge, export, import, verify, stats, prune and migrate cache folders.

Parsing and printing only; the work is in :mod:`geval_async.judging.store.maintenance`,
:mod:`geval_async.judging.store.archive` and :mod:`geval_async.judging.store.migrations`, which
open the
folders: read-only for the commands that only read (``export``, ``verify``, ``stats``, the
sources of ``merge``, ``prune --dry-run``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .overrides import add_judge_flag

EXIT_OK, EXIT_DAMAGED = 0, 1
_SHOWN = 10  # keys listed at most per kind of problem


def add_cache_commands(
    commands: Any,
    study_arguments: Callable[[argparse.ArgumentParser], None],
    load: Callable[[argparse.Namespace], Any],
) -> None:
    """Register ``cache`` and its subcommands on the CLI's subparsers."""
    group = commands.add_parser(
        "cache", help="merge, export, import, verify, stats, prune or migrate cache folders"
    )
    sub = group.add_subparsers(dest="cache_command", required=True, metavar="SUBCOMMAND")

    merge = sub.add_parser("merge", help="put several cache folders into one (a union)")
    merge.add_argument("dest", type=Path, help="the cache folder to merge into (created)")
    merge.add_argument("sources", type=Path, nargs="+", help="cache folders to read")
    merge.set_defaults(handler=cmd_merge)

    export = sub.add_parser("export", help="a study's entries to a compressed JSONL archive")
    study_arguments(export)
    export.add_argument("archive", type=Path, help="the archive to write (e.g. study.jsonl.gz)")
    export.set_defaults(handler=lambda args: cmd_export(args, load(args)))

    imp = sub.add_parser("import", help="an archive's entries into a cache folder")
    imp.add_argument("archive", type=Path, help="an archive written by `cache export`")
    imp.add_argument("dest", type=Path, help="the cache folder to import into (created)")
    imp.set_defaults(handler=cmd_import)

    verify = sub.add_parser("verify", help="check that every entry decodes and every body parses")
    verify.add_argument("cache", type=Path, help="a cache folder")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="remove what cannot be read, so that the next run asks it again",
    )
    verify.set_defaults(handler=cmd_verify)

    stats = sub.add_parser("stats", help="entries, size, answers and refusals by model/criterion")
    stats.add_argument("cache", type=Path, help="a cache folder")
    stats.set_defaults(handler=cmd_stats)

    prune = sub.add_parser(
        "prune", help="remove the entries that meet every condition given: model, age, disuse"
    )
    prune.add_argument("cache", type=Path, help="a cache folder")
    prune.add_argument(
        "--model", action="append", default=[], help="entries of this model (repeat for several)"
    )
    prune.add_argument(
        "--older-than", type=float, metavar="DAYS", help="entries stored more than DAYS days ago"
    )
    prune.add_argument(
        "--unused-by",
        nargs="+",
        type=Path,
        metavar="CONFIG",
        help="entries none of these study configs reads (at their n, model, prompts)",
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    prune.set_defaults(handler=cmd_prune)

    migrate = sub.add_parser(
        "migrate",
        help="move a cache folder written by an older geval-async to the current form "
        "(its JSON entries repacked, the study's old keys g1- moved to the new ones)",
    )
    study_arguments(migrate)
    add_judge_flag(migrate)  # a panel: every judge's entries, or this judge's
    migrate.set_defaults(handler=lambda args: cmd_migrate(load(args)))


def _print_merge(report: Any, what: str) -> None:
    print(
        f"{what}: {report.added} entries added, {report.identical} already there, "
        f"{len(report.conflicts)} clashing, {len(report.damaged)} damaged"
    )
    if report.conflicts:
        print("same key, different answer (the entry already in the destination was kept):")
        for key in report.conflicts[:_SHOWN]:
            print(f"  {key}")
        if len(report.conflicts) > _SHOWN:
            print(f"  ... and {len(report.conflicts) - _SHOWN} more")
    if report.damaged:
        print("damaged entries (not merged; `geval-async cache verify` lists them):")
        for key in report.damaged[:_SHOWN]:
            print(f"  {key}")


def cmd_merge(args: argparse.Namespace) -> int:
    from ..judging.store.maintenance import merge_caches

    report = merge_caches(args.dest, args.sources)
    _print_merge(report, f"merged {len(args.sources)} folders into {args.dest}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace, config: Any) -> int:
    from ..judging.store.archive import export_study

    count = export_study(config, args.archive)  # a panel: every judge's
    print(f"wrote {count} entries of {config.source} to {args.archive}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from ..judging.store.archive import import_archive

    report = import_archive(args.archive, args.dest)  # checked before the folder is created
    _print_merge(report, f"imported {args.archive} into {args.dest}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from ..judging.store.maintenance import repair_cache, verify_cache

    found = repair_cache(args.cache) if args.repair else verify_cache(args.cache)
    if not (found.damaged or found.unnamed):
        print(f"{args.cache}: all {found.entries} entries decode and every answer body parses")
        return EXIT_OK
    if found.damaged:
        print(f"{args.cache}: {len(found.damaged)} of {found.entries} entries are damaged:")
        for damage in found.damaged:
            print(f"  {damage.key}: {damage.problem}")
    if found.unnamed:
        print(f"{args.cache}: {found.unnamed} entries have a key that does not decode")
    if args.repair:
        print("removed: `geval-async run` asks for them again")
        return EXIT_OK
    print(
        "damaged entries count as missing: `geval-async run` asks for them again; "
        f"`geval-async cache verify --repair {args.cache}` removes them"
    )
    return EXIT_DAMAGED


def cmd_stats(args: argparse.Namespace) -> int:
    from ..judging.store.maintenance import cache_stats
    from .summary import table

    stats = cache_stats(args.cache)
    rows: dict[tuple[str, str], list[int]] = {}
    for (model, criterion, status), count in sorted(stats.by_model_criterion.items()):
        rows.setdefault((model, criterion), [0, 0])[status == "refusal"] += count
    print(
        table(
            ["model", "criterion", "answers", "refusals"],
            [[m, c, str(a), str(r)] for (m, c), (a, r) in rows.items()],
        )
    )
    print(
        f"{stats.entries} entries ({stats.answers} answers holding {stats.samples} samples, "
        f"{stats.refusals} refusals, {stats.damaged} damaged), "
        f"{stats.size_bytes / 1e6:.1f} MB on disk"
    )
    if stats.old_keys:
        print(
            f"{stats.old_keys} entries use the old keys (g1-): `geval-async cache migrate "
            "CONFIG` moves a study's to the new ones"
        )
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from ..judging.store.maintenance import PruneSelection, prune_cache
    from ..study.config import load_config
    from ..study.prepare import prepare_study

    # A panel's config reads every judge's entries, not its first judge's alone.
    members = [m for path in args.unused_by or () for m in load_config(path).members()]
    studies = tuple(prepare_study(member) for member in members)
    selection = PruneSelection(frozenset(args.model), args.older_than, studies)
    report = prune_cache(args.cache, selection, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {report.total} entries, kept {report.kept}")
    for (model, criterion), count in sorted(report.removed.items()):
        print(f"  {count:>8}  {model}  {criterion}")
    if args.dry_run:
        print("dry run: nothing was removed")
    return EXIT_OK


def cmd_migrate(config: Any) -> int:
    """Move the cache to the current form for the study; on a panel, for every judge (or the
    ``--judge``), each one's old entries moved to its own new keys."""
    from ..judging.store.migrations import migrate_folder

    done = migrate_folder(config)
    repacked = sum(d.repacked for d in done)
    if not config.is_panel:
        print(
            f"{config.cache_path}: repacked {repacked} entries, moved {done[0].moved} entries of "
            f"{config.source} from the old keys to the new ones; the folder is in the current form"
        )
    else:
        print(
            f"{config.cache_path}: repacked {repacked} entries; the folder is in the current form"
        )
        for name, migration in zip(config.judge_names, done, strict=True):
            print(
                f"judge {name}: moved {migration.moved} entries of {config.source} from the old "
                "keys to the new ones"
            )
    folded, dropped = sum(d.folded for d in done), sum(d.dropped for d in done)
    if folded or dropped:
        print(
            f"stored {folded} answers a stopped run had kept in the folder's journal"
            + (
                f"; {dropped} damaged or cut-off records of it were left out: the next run "
                "asks what they held again"
                if dropped
                else ""
            )
        )
    left = done[-1].left  # after every judge's entries were moved
    if left:
        print(
            f"{left} entries under the old keys (g1-) belong to no item of this study "
            "and are not read: `geval-async cache migrate` with their study's config moves them"
        )
    return EXIT_OK
