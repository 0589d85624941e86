"""Read the standard output of nccl-tests' all_reduce_perf, reduce_scatter_perf and all_gather_perf.

Format (NVIDIA/nccl-tests src/util.cu `writeResultHeader`/`writeBenchmarkLine*`; older releases in
src/common.cu): an optional `# nccl-tests version ...` and `# Collective test starting: NAME`
line, a `# nThread ... nGpus ... minBytes ...` line, `# Using devices`, one `#  Rank N [Group G]
[Pid P] on HOST device D [BUS] NAME` line per rank, then a table whose column header line starts
with `#  size  count  type  redop`, optionally `root`, then for out-of-place and in-place each
`time|cputime  algbw  busbw  #wrong|error` (per-iteration builds add `i_min i_max i_p99 i_cv%`,
`-R` adds a timestamp). Rows are whitespace-separated. Lines that are neither (MPI or NCCL INFO
messages interleaved by mpirun, markdown around a pasted log) are skipped, and the per-line tags of
`mpirun --tag-output` (`[1,0]<stdout>:`) and `srun --label` (`0: `) are removed; a row that starts like
a data row but does not parse is an error with its line number.

The table is read by its header, not by position, so every release since 2.0 parses: with or
without `Group`/`Pid`, `root`, `#wrong` or the older `error` (max deviation) column. We keep the
out-of-place columns (the first time/algbw/busbw): in-place can alias input and output buffers.
Which collective a table measured comes from, in order: the `Collective test starting` line, the
`op` argument, the file name, and otherwise nccl-tests' own bus-bandwidth factor (busbw / algbw is
2(n-1)/n for all-reduce and (n-1)/n for reduce-scatter and all-gather, doc/PERFORMANCE.md; an
all-gather prints redop `none`). Every row is checked against that factor: a printed busbw more
than 2% (plus print rounding) away from size / time x factor means the rank count or the
collective is wrong, and the file is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.errors import InputError
from advisor.fileio import distinct_files
from advisor.imports.algorithm import algorithm_from_text, busbw_ceiling_factor, expected_algorithm
from advisor.imports.common import (
    build,
    check_collective,
    check_hardware_reaches,
    decimal,
    not_this_format,
    other_gpu_warning,
    read_log,
    target_file,
    whole_number,
)
from advisor.text import plural
from advisor.topology.collectives import bus_bandwidth

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration, Collective
    from advisor.spec import Workload

#: Test programs advisor models (their collectives are the ones DDP and FSDP issue).
PROGRAMS = {"all_reduce_perf": "all_reduce", "reduce_scatter_perf": "reduce_scatter", "all_gather_perf": "all_gather"}

# Every pattern is anchored at the line's start and linear in its length (no nested or adjacent
# quantifiers over the same characters), and ASCII: `\d` would also take `²` or `٣`.
_RANK = re.compile(r"^#\s*Rank\s+(\S+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)",
                   re.ASCII)
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)", re.ASCII)
_NTHREAD = re.compile(r"^#?\s*nThread\s+\d+\s+nGpus\s+\d+", re.ASCII)
#: Output tags mpirun adds with --tag-output / srun with --label: `[1,0]<stdout>:`, `0: `.
_TAG = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)", re.ASCII)
#: A data row starts with two numbers (a sign, a digit of any script: read strictly, then
#: refused) and, if it goes on, a data type word; anything else in a table is noise and skipped.
_NUMERIC_START = re.compile(r"[+-]?\.?\d")
_TYPE = re.compile(r"[a-z][a-z0-9_]*", re.ASCII)
_TIME_COLUMNS = ("time", "cputime")
#: The units row under the column header, as every nccl-tests release prints it: rows are read in these
#: units, so a row claiming others (a fork or an edit printing "(ms)" or "(MB/s)") is refused, not read
#: 1,000x off under a busbw-factor error that blamed the rank count.
_UNITS = {"(B)", "(elements)", "(us)", "(GB/s)"}


@dataclass(frozen=True)
class Row:
    line: int
    bytes: int
    seconds: float
    algbw: float
    busbw: float


@dataclass
class Table:
    """One nccl-tests run: its header lines, ranks and out-of-place rows."""

    first_line: int
    header: list[str] = field(default_factory=list)
    program: str | None = None
    algorithm: str | None = None
    """NCCL_ALGO as the log sets it before or in this table (advisor.imports.algorithm), else None."""
    ranks: dict[int, str] = field(default_factory=dict)
    devices: dict[int, tuple[int, str]] = field(default_factory=dict)
    """Per rank: (line, the device name its `# Rank` line ends with, after the bus id), where it names one."""
    columns: list[str] | None = None
    redops: set[str] = field(default_factory=set)
    rows: list[Row] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return len(self.ranks)

    @property
    def hosts(self) -> list[str]:
        return sorted(set(self.ranks.values()))


def _row_like(tokens: list[str]) -> bool:
    """Starts like a data row (then it parses, or is an error with its line, never skipped)."""
    return (len(tokens) >= 2 and all(_NUMERIC_START.match(t) for t in tokens[:2])
            and (len(tokens) == 2 or bool(_TYPE.fullmatch(tokens[2]))))


def _number(text: str, file: str, line: int, column: str) -> float:
    return decimal(text, file, f"line {line}.{column}", "a finite number >= 0 in an nccl-tests row")


def _columns(line: str) -> list[str]:
    return line.lstrip("#").split()


def _row(table: Table, tokens: list[str], file: str, lineno: int) -> None:
    cols = table.columns or []
    expected = len([c for c in cols if c != "timestamp"])
    if len(tokens) < expected:
        if len(tokens) == expected - 4:
            table.dropped.append(f"line {lineno}: in-place only (no out-of-place columns)")
            return
        raise InputError.at(
            file,
            f"line {lineno}",
            f"truncated nccl-tests row: expected {expected} fields like the column header",
            " ".join(tokens),
        )
    at = {name: cols.index(name) for name in ("size", "redop", "algbw", "busbw") if name in cols}
    t_at = next(cols.index(c) for c in _TIME_COLUMNS if c in cols)
    size = whole_number(tokens[at["size"]], file, f"line {lineno}.size", "a size in bytes")
    if "count" in cols:
        whole_number(tokens[cols.index("count")], file, f"line {lineno}.count", "an element count")
    if "redop" in at:
        table.redops.add(tokens[at["redop"]])
    # out-of-place and in-place each count wrong elements: either above 0 means the collective corrupted
    # data on this system, and the row's timing is no measurement of a working collective
    for where, j in zip(("", " in place"), [j for j, c in enumerate(cols) if c == "#wrong"], strict=False):
        if tokens[j] not in ("N/A", "0"):
            table.dropped.append(f"line {lineno}: nccl-tests counted {tokens[j]} wrong elements{where}; row left out")
            return
    if size == 0:
        return
    seconds = _number(tokens[t_at], file, lineno, cols[t_at]) * 1e-6
    if seconds <= 0:
        raise InputError.at(file, f"line {lineno}.time", "must be a positive number of microseconds", tokens[t_at])
    table.rows.append(
        Row(
            lineno,
            size,
            seconds,
            _number(tokens[at["algbw"]], file, lineno, "algbw"),
            _number(tokens[at["busbw"]], file, lineno, "busbw"),
        )
    )


def _odd_units(tokens: list[str]) -> set[str]:
    """In a units row (every token parenthesised), the sizes, times and bandwidths not in nccl-tests' units
    (a per-iteration build's other columns, such as a percentage, are no unit advisor reads)."""
    from advisor.units import SIZE_UNITS, TIME_UNITS

    if not tokens or not all(t.startswith("(") and t.endswith(")") for t in tokens):
        return set()
    return {t for t in tokens if t not in _UNITS and (t[1:-1] in TIME_UNITS or t[1:-1] in SIZE_UNITS
                                                     or t.endswith("/s)"))}


def _table_header(line: str, file: str, lineno: int) -> list[str]:
    cols = _columns(line)
    missing = [c for c in ("size", "algbw", "busbw") if c not in cols]
    if missing or not any(c in cols for c in _TIME_COLUMNS):
        raise InputError.at(
            file, f"line {lineno}", "nccl-tests column header without size, time, algbw and busbw", line.strip()
        )
    return cols


def read_tables(text: str, file: str) -> list[Table]:
    """Every nccl-tests table in `text` (a log may hold several runs one after another)."""
    tables: list[Table] = []
    current: Table | None = None
    pending_program: str | None = None
    pending_header: list[str] = []
    algorithm: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _TAG.sub("", raw).strip()
        if not line:
            continue
        if "NCCL_ALGO" in line and (named := algorithm_from_text(line)) is not None:
            algorithm = named
            if current is not None and not current.rows:
                current.algorithm = algorithm
        if m := _STARTING.match(line):
            pending_program = m.group(1)
            pending_header.append(line)
            continue
        if line.startswith("# nccl-tests version"):
            pending_header.append(line)
            continue
        if _NTHREAD.match(line):
            current = Table(lineno, [*pending_header, line], pending_program, algorithm)
            tables.append(current)
            pending_program, pending_header = None, []
            continue
        if current is None:
            continue
        if m := _RANK.match(line):
            rank = whole_number(m.group(1), file, f"line {lineno}.rank", "a rank number")
            if rank in current.ranks:
                raise InputError.at(
                    file,
                    f"line {lineno}",
                    f"rank {rank} is listed twice: these are separate jobs, not one "
                    "job of many ranks (was nccl-tests built with MPI=1 and run under mpirun/srun?)",
                    line,
                )
            current.ranks[rank] = m.group(2)
            current.devices[rank] = (lineno, line[m.end():].strip().removeprefix("[").partition("]")[2].strip())
            continue
        if line.startswith("#") and "size" in _columns(line)[:1]:
            current.columns = _table_header(line, file, lineno)
            continue
        if current.columns and line.startswith("#") and (odd := _odd_units(_columns(line))):
            raise InputError.at(file, f"line {lineno}", f"units {', '.join(sorted(odd))} are not nccl-tests' "
                                "own: advisor reads sizes in (B), times in (us) and bandwidths in (GB/s), as "
                                "every nccl-tests release prints them", line)
        tokens = line.split()
        if current.columns and _row_like(tokens):
            _row(current, tokens, file, lineno)
    return tables


def _program_from_name(file: str) -> str | None:
    name = Path(file).name
    found = [p for p in PROGRAMS if p.removesuffix("_perf") in name]
    return found[0] if len(found) == 1 else None


def _infer_op(table: Table, file: str) -> str:
    """The collective from nccl-tests' busbw factor: rows whose algbw is printed with >= 3 digits."""
    n = table.gpus
    ratios = [r.busbw / r.algbw for r in table.rows if r.algbw >= 1.0]
    if not ratios:
        raise InputError.at(
            file,
            f"line {table.first_line}",
            "cannot tell which collective this table measured (no "
            "'Collective test starting' line, no test name in the file name, no row with algbw >= 1 GB/s); "
            "pass --op all_reduce|reduce_scatter|all_gather",
        )
    ratio = sorted(ratios)[len(ratios) // 2]
    candidates = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n}
    op = min(candidates, key=lambda k: abs(candidates[k] - ratio))
    if abs(candidates[op] - ratio) > 0.05 * candidates[op]:
        raise InputError.at(
            file,
            f"line {table.first_line}",
            f"busbw/algbw = {ratio:.3f} matches no collective advisor "
            f"models on {n} ranks (all_reduce {candidates['all_reduce']:.3f}, reduce_scatter/all_gather "
            f"{candidates['reduce_scatter']:.3f}): another test (broadcast, sendrecv, alltoall)?",
        )
    if op == "reduce_scatter" and table.redops == {"none"}:
        op = "all_gather"
    return op


def table_op(table: Table, file: str, op: str | None = None) -> str:
    """Which of all_reduce, reduce_scatter, all_gather `table` measured (module docstring)."""
    program = table.program
    if program is not None:
        base = program.removesuffix("_mpi")
        if base not in PROGRAMS:
            raise InputError.at(
                file,
                f"line {table.first_line}",
                f"advisor models {', '.join(PROGRAMS)} (DDP and FSDP collectives), not this test",
                program,
            )
        return PROGRAMS[base]
    if op is not None:
        return op
    named = _program_from_name(file)
    return PROGRAMS[named] if named else _infer_op(table, file)


def check_busbw(table: Table, op: str, file: str) -> None:
    """Refuse a table whose printed busbw disagrees with size / time x nccl-tests' factor for its
    ranks (advisor.imports.common.check_collective, the check `--collect` applies to probes)."""
    for r in table.rows:
        try:
            check_collective(op, table.gpus, r.bytes, r.seconds, r.busbw, file, f"line {r.line}.busbw")
        except InputError as exc:
            p = exc.problems[0]
            raise InputError.at(p.file, p.path, f"printed {p.message} (pass --op)", r.busbw) from None


def read_nccl_tests(path: str | Path, op: str | None = None) -> list[tuple[Table, str]]:
    """Parse one log: [(table, op)] for each run in it. Not nccl-tests output: InputError with the line."""
    file = str(path)
    text = read_log(path)
    tables = [t for t in read_tables(text, file) if t.columns is not None or t.rows]
    if not tables:
        raise not_this_format(
            file,
            text,
            "not nccl-tests output: no '# nThread ...' line followed by a "
            "'#  size  count  type ...' column header (expected the stdout of all_reduce_perf, "
            "reduce_scatter_perf or all_gather_perf)",
        )
    out = []
    for t in tables:
        if not t.ranks:
            raise InputError.at(
                file,
                f"line {t.first_line}",
                "no '#  Rank N ... on HOST device D' lines: cannot count "
                "the GPUs of this run (keep the lines under '# Using devices')",
            )
        if t.gpus < 2:
            raise InputError.at(file, f"line {t.first_line}", "a collective needs at least 2 ranks", t.gpus)
        if sorted(t.ranks) != list(range(t.gpus)):
            raise InputError.at(
                file, f"line {t.first_line}", "ranks are not 0..N-1: the '# Rank' lines are incomplete", sorted(t.ranks)
            )
        if not t.rows and t.dropped:  # said as "no rows with a non-zero size", hiding why each went
            where, why = (part.strip() for part in t.dropped[0].split(":", 1))
            more = f" (and {plural(len(t.dropped) - 1, 'more row')} left out)" if len(t.dropped) > 1 else ""
            raise InputError.at(file, where, f"no row of the table is usable: {why}{more}")
        if not t.rows:
            raise InputError.at(file, f"line {t.first_line}", "table has no rows with a non-zero size")
        kind = table_op(t, file, op)
        check_busbw(t, kind, file)
        out.append((t, kind))
    return out


def _provenance_line(path: Path, table: Table) -> str:
    import datetime as dt

    try:
        date = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date().isoformat()
    except OSError:
        date = "unknown date"
    return f"nccl-tests log {path.name} (file dated {date}), line {table.first_line}: {' | '.join(table.header)}"


def _nodes(table: Table, nodes: int | None, workload: "Workload", file: str) -> int:
    """The nodes a table's ranks ran on (--nodes, else its distinct hosts), checked by the one
    placement rule (advisor.placement.check_placement) and against the hosts the log names."""
    from collections import Counter

    from advisor.placement import check_placement

    hosts = Counter(table.ranks.values())
    where = f"{file}: line {table.first_line}"
    if nodes is not None and nodes < len(hosts):
        raise InputError.at("--nodes", "", f"the ranks of {file} ran on {plural(len(hosts), 'distinct host')} "
                            f"({', '.join(table.hosts)}): fewer nodes would record network traffic as intra-node",
                            nodes)
    if nodes is None and len(set(hosts.values())) > 1:
        spread = ", ".join(f"{h}: {n}" for h, n in sorted(hosts.items()))
        raise InputError.at(where, "", "ranks spread unevenly over hosts: every node must run the same number of "
                            "ranks", spread)
    n_nodes = nodes if nodes is not None else len(hosts)
    if nodes is not None and n_nodes > table.gpus:
        raise InputError.at("--nodes", "", f"more nodes than the {table.gpus} ranks of {file}", n_nodes)
    per_node = -(-table.gpus // n_nodes)
    if per_node > workload.cluster.gpus_per_node:
        raise InputError.at(where, "", f"{plural(table.gpus, 'rank')} on {plural(n_nodes, 'host')} exceed the "
                            f"workload's cluster.gpus_per_node ({workload.cluster.gpus_per_node}); pass --nodes if "
                            "the hosts share a name", per_node)
    check_placement(table.gpus, n_nodes, workload.cluster.gpus_per_node, "--nodes" if nodes else where,
                    f"{table.gpus}@{n_nodes}")
    return n_nodes


def collectives_from_log(
    path: str | Path, workload: "Workload", nodes: int | None = None, op: str | None = None
) -> tuple[list["Collective"], list[str]]:
    """[[collectives]] rows (out-of-place) of every run in one log, and notes for the user."""
    from advisor.calibration_data import Collective

    path = Path(path)
    file = str(path)
    found, notes = [], []
    for table, kind in read_nccl_tests(path, op):
        n_nodes = _nodes(table, nodes, workload, file)
        where = _provenance_line(path, table)
        for r in table.rows:
            found.append(
                build(
                    Collective,
                    file,
                    r.line,
                    op=kind,
                    gpus=table.gpus,
                    nodes=n_nodes,
                    bytes=r.bytes,
                    seconds=r.seconds,
                    busbw=r.busbw,
                    algorithm=table.algorithm,
                    source=f"{where}; row at line {r.line}, out-of-place",
                )
            )
        top = max(table.rows, key=lambda r: r.busbw)
        check_hardware_reaches(workload, kind, table.algorithm, table.gpus, n_nodes, top.busbw, file,
                               f"line {top.line}.busbw")
        notes.extend(_table_notes(file, table, kind, n_nodes, workload))
        notes.extend(_device_notes(file, table, workload))
        notes.extend(f"{file}: {d}" for d in table.dropped)
    return found, notes


def _device_notes(file: str, table: Table, workload: "Workload") -> list[str]:
    """The first rank whose `# Rank` line names a catalog GPU other than the spec's, warned about
    (advisor.imports.common.other_gpu_warning)."""
    for line, name in table.devices.values():
        if found := other_gpu_warning(file, f"line {line}", name, workload):
            return found
    return []


def _table_notes(file: str, table: Table, kind: str, n_nodes: int, workload: "Workload") -> list[str]:
    """What was read, with the algorithm, and a warning when the largest busbw is far above what that
    algorithm reaches on the declared link (advisor.imports.algorithm): the log is from elsewhere."""
    top = max(r.busbw for r in table.rows)
    algo = table.algorithm or expected_algorithm(kind, n_nodes)
    said = "NCCL_ALGO" if table.algorithm else f"expected on {plural(n_nodes, 'node')}; NCCL_ALGO not in the log"
    where = f"{plural(table.gpus, 'GPU')} over {plural(n_nodes, 'node')} ({', '.join(table.hosts)})"
    notes = [f"{file}: {kind} on {where}, {algo} ({said}): {plural(len(table.rows), 'size')}, "
             f"largest busbw {top:.4g} GB/s"]
    declared = float(bus_bandwidth(workload, np.array([float(n_nodes)]))[0]) / 1e9
    ceiling = busbw_ceiling_factor(table.algorithm, kind, table.gpus, n_nodes) * declared
    if top > 1.5 * ceiling:
        link = "inter-node" if n_nodes > 1 else "intra-node"
        notes.append(f"warning: {file}: busbw {top:.4g} GB/s is {top / ceiling:.1f}x what {algo} reaches on the "
                     f"workload's declared {link} bus bandwidth ({declared:.4g} GB/s, at most {ceiling:.4g} GB/s "
                     "busbw): is this log from this workload's cluster?")
    return notes


def import_nccl_tests(
    workload_path: str | Path,
    logs: list[str | Path],
    out: str | Path | None = None,
    nodes: int | None = None,
    op: str | None = None,
    command: str | None = None,
) -> tuple["Calibration", Path, list[str]]:
    """Add the collectives of nccl-tests logs to a calibration file (created if absent), atomically
    under its lock. Rows already in the file (same op, placement, size and time) are not repeated."""
    from advisor.calibration_data import now_utc, update_calibration_file
    from advisor.spec import load_workload

    w = load_workload(workload_path)
    if op is not None and op not in PROGRAMS.values():
        raise InputError.at("--op", "", f"choose from {', '.join(PROGRAMS.values())}", op)
    if nodes is not None and nodes < 1:
        raise InputError.at("--nodes", "", "must be >= 1", nodes)
    logs, notes = distinct_files(logs)
    found = []
    for log in logs:
        rows, more = collectives_from_log(log, w, nodes, op)
        found += rows
        notes += more
    out, new = target_file(w, workload_path, out, "nccl-tests", logs, "Collectives", command)
    names = ", ".join(Path(p).name for p in logs)

    def change(cal: Calibration) -> Calibration:
        def key(c):
            return (c.op, c.gpus, c.nodes, c.bytes, c.seconds)

        have = {key(c) for c in cal.collectives}
        fresh = []
        for c in found:  # a row twice in these logs (two copies of one log) is kept once too
            if key(c) not in have:
                have.add(key(c))
                fresh.append(c)
        if len(fresh) < len(found):
            repeated = len(found) - len(fresh)
            notes.append(f"{out}: {plural(repeated, 'row')} {'was' if repeated == 1 else 'were'} already in the file; "
                         "not repeated")
        prov = cal.provenance
        if cal.collectives or cal.runs:
            line = f"Added {len(fresh)} nccl-tests collectives on {now_utc()} from {names}."
            prov = prov.model_copy(update={"notes": f"{prov.notes} {line}" if prov.notes else line})
        return cal.model_copy(update={"collectives": [*cal.collectives, *fresh], "provenance": prov})

    return update_calibration_file(out, w.name, new, change), out, notes
