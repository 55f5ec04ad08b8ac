"""What is done before and after a run so that a failure leaves one line and no damage: read-only
output folders (checked by the Snakefile), stale Snakemake locks and damaged prepared data set
aside (by ``kernelscale repair``, which ``make run`` runs before snakemake: the Snakefile moves
no file), and a failed job's log turned into a line naming the config key to change.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from pathlib import Path

from .configuration import config_file_of, tracking
from .runs import run_datasets


def unwritable_output_line(config: dict, workdir=".") -> str | None:
    """One line when the workflow cannot write where its jobs write, else None.

    Checked from the Snakefile before the DAG is built. Places: ``results/`` and every folder in
    it (not inside Zarr stores, which prepare replaces whole), the MLflow SQLite file of
    ``tracking.uri`` and the download cache when a dataset is downloaded. A place that does not
    exist yet needs its nearest existing parent writable. A single read-only file in a writable
    folder is left to Snakemake."""
    work = Path(workdir).resolve()
    places = [work / "results"]
    uri = tracking(config)["uri"]
    if uri.startswith("sqlite:///"):  # sqlite:///rel/path or sqlite:////abs/path
        places.append(work / uri[len("sqlite:///"):])
    if any("url" in (config.get("datasets") or {}).get(d, {}) for d in run_datasets(config)):
        from .data.download import cache_dir

        places.append(work / cache_dir())
    bad = []
    for place in places:
        if not place.exists():
            parent = place.parent  # the nearest existing one
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
            if not os.access(parent, os.W_OK | os.X_OK):
                bad.append(parent)
            continue
        if place.is_file():
            bad += [p for p in (place, place.parent) if not os.access(p, os.W_OK)]
            continue
        for folder, subfolders, _ in os.walk(place):
            subfolders[:] = sorted(d for d in subfolders if not d.endswith(".zarr"))
            if not os.access(folder, os.W_OK | os.X_OK):
                bad.append(Path(folder))
    if not bad:
        return None
    bad = list(dict.fromkeys(bad))
    shown = [str(p.relative_to(work)) if p.is_relative_to(work) else str(p) for p in bad]
    kind = "file" if bad[0].is_file() else "folder"
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"kernelscale: {shown[0]}: read-only {kind}{more} where the workflow writes; "
            "nothing has run: make it writable (chmod -R u+w, or chattr -R -i as root) or run "
            "in another directory")


def _say(line: str) -> str:
    print(line, file=sys.stderr, flush=True)
    return line


def _snakemake_pids(workdir) -> list[int] | None:
    """PIDs of snakemake processes (any mode) working in ``workdir``, other than this process
    and its ancestors (a shell or ``make`` that started us may carry 'snakemake' in its command
    line). Linux /proc only; elsewhere the answer is unknown and None is returned."""
    proc = Path("/proc")
    if not (proc / "self" / "cmdline").exists():
        return None
    workdir = Path(workdir).resolve()
    skip, pid = set(), os.getpid()
    while pid > 1:  # ourselves and our ancestors
        skip.add(pid)
        try:
            stat = (proc / str(pid) / "stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    for p in proc.iterdir():
        if not p.name.isdigit() or int(p.name) in skip:
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            cwd = Path(os.readlink(p / "cwd")).resolve()
        except OSError:  # gone, or another user's process
            continue
        if cwd == workdir and any(Path(a.decode(errors="replace")).name == "snakemake"
                                  for a in argv):
            found.append(int(p.name))
    return found


def set_aside_damaged_data(config: dict, workdir=".") -> list[str]:
    """Move every damaged prepared dataset of the config's runs aside
    (``data.store.prepared_fault``: a file of an array missing, changed or unexpected,
    ``meta.json`` unreadable or without checksums), so that Snakemake re-runs prepare and the jobs
    downstream: ``results/data/<name>`` becomes ``results/data/<name>.damaged`` (replacing an
    older one). Nothing is moved while
    another snakemake process works in ``workdir`` or when that cannot be checked (no /proc).
    Prints and returns one line per damaged dataset."""
    from .data.store import prepared_fault

    data = Path(workdir) / "results" / "data"
    faults = {name: fault for name in run_datasets(config)
              if (fault := prepared_fault(data / name)) is not None}
    if not faults:
        return []
    others = _snakemake_pids(workdir)
    lines = []
    for name, fault in faults.items():
        folder = data / name
        if others is None or others:
            line = (f"kernelscale: {folder}: {fault}; not re-preparing it while another "
                    "snakemake runs here (re-run when it has finished)")
        else:
            aside = data / f"{name}.damaged"
            shutil.rmtree(aside, ignore_errors=True)
            folder.rename(aside)
            line = (f"kernelscale: {folder}: {fault}; moved to {aside}, prepare runs again")
        lines.append(_say(line))
    return lines


def _lock_owners(workdir):
    """None when ``workdir`` holds no Snakemake lock, else ``_snakemake_pids(workdir)``."""
    locks = Path(workdir) / ".snakemake" / "locks"
    return _snakemake_pids(workdir) if locks.is_dir() and any(locks.glob("*.lock")) else None


def clear_stale_locks(workdir=".") -> str | None:
    """Remove Snakemake's directory lock when no snakemake process works in ``workdir`` (jobs of a
    killed run included) and that can be checked (/proc). Returns the line it printed, or None."""
    if _lock_owners(workdir) != []:  # no lock, a snakemake running, or unknown
        return None
    shutil.rmtree(Path(workdir) / ".snakemake" / "locks", ignore_errors=True)
    return _say(f"kernelscale: removed a stale Snakemake lock in {Path(workdir).resolve()} "
                "(no snakemake process is running there)")


def held_lock_line(workdir=".") -> str | None:
    """One line when Snakemake's lock in ``workdir`` is held by another snakemake process still
    working there; None otherwise (a lock whose owner is gone: see ``clear_stale_locks``)."""
    others = _lock_owners(workdir)
    if not others:
        return None
    return (f"kernelscale: another snakemake (pid {', '.join(map(str, others))}) runs in "
            f"{Path(workdir).resolve()} and holds its lock: wait for it or stop it; if it is no "
            "run of this workflow, clear the lock with `.venv/bin/snakemake --unlock`")


def _job_config_key(rule: str, log: str):
    """The config entry behind a failed job, from its log path (see the rules' ``log:``)."""
    m = re.search(r"logs/train/([^/]+)/([^/]+)/seed\d+\.log$", log)
    if rule == "train" and m:
        return ("algorithms", m.group(2)), f"{m.group(1)}/{m.group(2)}"
    m = re.search(r"logs/(?:prepare|download)/([^/.]+(?:\.[^/]+)*?)(?:/[^/]+)?\.log$", log)
    if rule in ("prepare", "download") and m:
        return ("datasets", m.group(1)), m.group(1)
    return None, None


def _killed_by(text: str) -> str | None:
    """The signal that ended a job's command, from Snakemake's report of it in ``text``: "died
    with <Signals.SIGKILL: 9>", or a shell's exit status 128 + signal number."""
    found = re.findall(r"died with <Signals\.(\w+)|non-zero exit status (\d+)", text)
    if not found:
        return None
    name, status = found[-1]
    if name or int(status) <= 128:
        return name or None
    try:
        return signal.Signals(int(status) - 128).name
    except ValueError:
        return None


def failed_job_lines(snakemake_logs) -> list[str]:
    """One line per failed job of a Snakemake run: the error line its kernelscale command wrote
    in its log, the config entry behind the job and the file holding it, and the log's path, so
    the end of the console says what went wrong and where to fix it without scrolling through
    Snakemake's job dump (command line, JSON spec, ...). ``snakemake_logs``: the run's log
    file(s) (the ``log`` of ``onerror``)."""
    def read(path) -> str:
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""

    if isinstance(snakemake_logs, (str, Path)):
        snakemake_logs = [snakemake_logs]
    text = "".join(read(path) for path in snakemake_logs or ())
    lines, before = [], 0
    for m in re.finditer(r"Error in rule (\S+?):.*?\n\s+log: (\S+)", text, re.S):
        rule, log = m.group(1), m.group(2)
        body = [ln for ln in read(log).splitlines() if ln.strip()]
        errors = [ln for ln in body if ": error:" in ln]
        last = (errors or body or ["(empty log)"])[-1].strip()
        killed = None if errors else _killed_by(text[before:m.start()])
        if killed:  # its log ends with a progress line, which says nothing of why it stopped
            last = f"killed by {killed}" + (" (out of memory, or kill -9)"
                                            if killed == "SIGKILL" else "")
        before = m.end()
        key, what = _job_config_key(rule, log)
        where = (f" ({what}; config {'.'.join(key)} in {config_file_of(key)})" if key else "")
        line = f"failed: rule {rule}{where}: {last} [log: {log}]"
        if line not in lines:
            lines.append(line)
    return lines
